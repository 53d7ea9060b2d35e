package disktier

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
)

const childEnv = "PREFIXD_DISKTIER_KILL_CHILD"

// TestKillNine runs a writer in a child process, kills it with SIGKILL
// while it writes, and reopens its directory: every block the child saw
// written is there and reads back whole, no record is corrupt, and the
// temporary file a write in flight may have left is removed by the scan.
func TestKillNine(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		killChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNine$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	durable := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() && durable < 300 {
		if n, ok := strings.CutPrefix(sc.Text(), "durable "); ok {
			durable, _ = strconv.Atoi(n)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if durable < 300 {
		t.Fatalf("the child reported %d blocks before it stopped", durable)
	}
	d, err := New(Config{Dir: dir, CapacityBytes: 1 << 30, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.WaitScan()
	now := time.Now().UnixNano()
	for i := 0; i <= durable; i++ {
		toks, fp, data := block("k", i)
		b, ok := d.Get("k", fp, toks, now)
		if !ok || string(b.Data) != string(data) {
			t.Fatalf("block %d, written before the kill, is lost (%v)", i, ok)
		}
	}
	if s := d.Stats(); s.Corrupt != 0 || s.Blocks < durable+1 {
		t.Fatalf("after the kill: %+v, %d durable", s, durable+1)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(tmp) != 0 {
		t.Fatalf("temporary files left after the scan: %v", tmp)
	}
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
}

// killChild writes blocks until it is killed, reporting each once the
// writer has put it in place.
func killChild(dir string) {
	d, err := New(Config{Dir: dir, CapacityBytes: 1 << 30, Model: model, Clock: clock.Real{}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	now := time.Now().UnixNano()
	for i := 0; i < 1_000_000; i++ {
		toks, fp, data := block("k", i)
		for !d.Put("k", fp, toks, eviction.StoredBlock{Data: data, LastUsed: now, Expires: now}, 0) {
			d.Wait() // the queue is full
		}
		if i%4 == 0 {
			d.Wait()
			fmt.Println("durable", i)
		}
	}
	os.Exit(0)
}

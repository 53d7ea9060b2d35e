package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/model"
)

// TestProgressRateLimited: a progress line comes only once the interval
// has passed since the start and since the last line, and the message is
// built only for a line that is written.
func TestProgressRateLimited(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(1000, 0)
	p := startProgress(&out, "job", 2*time.Second, func() time.Time { return clock })
	built := 0
	step := func(after time.Duration) {
		clock = clock.Add(after)
		p.report(func() string { built++; return "step" })
	}
	step(500 * time.Millisecond) // 0.5 s: too early
	step(time.Second)            // 1.5 s
	step(500 * time.Millisecond) // 2 s: due
	step(time.Second)            // 3 s: 1 s after the last line
	step(1500 * time.Millisecond)
	if got, want := out.String(), "job: step (2s)\njob: step (5s)\n"; got != want || built != 2 {
		t.Errorf("progress wrote %q and built %d messages, want %q and 2", got, built, want)
	}
}

// TestProgressBytes: the counting writer passes the bytes through and
// reports how many of the total have gone; under a TeeReader, how many
// were read.
func TestProgressBytes(t *testing.T) {
	var out, dst bytes.Buffer
	clock := time.Unix(0, 0)
	p := startProgress(&out, "writing m.gguf", time.Second, func() time.Time { return clock })
	w := &countingWriter{w: &dst, total: 4 << 20, p: p, verb: "wrote"}
	w.Write(make([]byte, 1<<20))
	clock = clock.Add(time.Second)
	w.Write(make([]byte, 1<<20))
	if got, want := out.String(), "writing m.gguf: wrote 2 MiB of 4 MiB (50%) (1s)\n"; got != want || dst.Len() != 2<<20 {
		t.Errorf("wrote %d bytes and reported %q, want 2 MiB and %q", dst.Len(), got, want)
	}

	out.Reset()
	r := io.TeeReader(strings.NewReader(strings.Repeat("x", 3<<20)), &countingWriter{w: io.Discard, p: p, verb: "read"})
	clock = clock.Add(time.Second)
	if n, err := r.Read(make([]byte, 3<<20)); n != 3<<20 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if got, want := out.String(), "writing m.gguf: read 3 MiB (2s)\n"; got != want {
		t.Errorf("reported %q, want %q", got, want)
	}
}

// TestServeLoadProgress: while the model loads, serve logs now and then
// that it still does.
func TestServeLoadProgress(t *testing.T) {
	var stderr syncBuffer
	savedLoad, savedEvery := loadModelFile, loadProgressEvery
	defer func() { loadModelFile, loadProgressEvery = savedLoad, savedEvery }()
	loadProgressEvery = time.Millisecond
	loadModelFile = func(string, string, bool) (*model.Model, error) {
		// A hang guard, not a timing: the first tick comes at once.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if strings.Contains(stderr.String(), `msg="still loading the model"`) {
				return nil, errors.New("the test's load fails once it has been reported")
			}
		}
		return nil, errors.New("no progress logged within a minute")
	}
	err := serve(t.Context(), func() {}, []string{"--addr", "127.0.0.1:0", "--threads", "1"}, nil, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "once it has been reported") {
		t.Errorf("serve: %v\n%s", err, stderr.String())
	}
}

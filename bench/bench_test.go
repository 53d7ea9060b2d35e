package bench

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
)

var (
	tinyOnce sync.Once
	tinyRep  *Report
	tinyErr  error
)

// tinyReport runs the tiny suite on the no-compute model once per test
// binary.
func tinyReport(t *testing.T) *Report {
	t.Helper()
	tinyOnce.Do(func() {
		var ws []*Workload
		if ws, tinyErr = Suite(Tiny, 1); tinyErr == nil {
			tinyRep, tinyErr = RunSuite(context.Background(), &NullModel{}, 257, ws, nil)
		}
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyRep
}

func find(t *testing.T, r *Report, w, m string) Result {
	t.Helper()
	res, ok := r.Find(w, m)
	if !ok {
		t.Fatalf("no result for %s/%s", w, m)
	}
	return res
}

func TestTinySuiteSane(t *testing.T) {
	rep := tinyReport(t)
	for _, r := range rep.Results {
		if r.Failed != 0 || r.LeakedBlocks != 0 || r.GeneratedTokens == 0 || r.Steps == 0 {
			t.Errorf("%s/%s: failed %d, leaked blocks %d, generated %d, steps %d", r.Workload, r.Mode, r.Failed, r.LeakedBlocks, r.GeneratedTokens, r.Steps)
		}
		if r.KVEfficiency <= 0 || r.KVEfficiency > 1 || r.SlotUtil <= 0 || r.SlotUtil > 1 || r.HitRate < 0 || r.HitRate > 1 {
			t.Errorf("%s/%s: a ratio out of range: %+v", r.Workload, r.Mode, r)
		}
		if r.PeakRunning < 1 || r.PeakRunning > r.Width || r.TTFTp50 > r.TTFTp99 || r.ITLp50 > r.ITLp99 {
			t.Errorf("%s/%s: peak %d of width %d, TTFT %v/%v, ITL %v/%v", r.Workload, r.Mode, r.PeakRunning, r.Width, r.TTFTp50, r.TTFTp99, r.ITLp50, r.ITLp99)
		}
	}
	for _, w := range []string{SkewSeed, SkewLongTail} {
		for _, width := range []int{2, 8} {
			c, s := find(t, rep, w, skewMode(0, width)), find(t, rep, w, skewMode(1, width))
			if s.SlotUtil >= c.SlotUtil {
				t.Errorf("%s width %d: static slot utilisation %.2f >= continuous %.2f", w, width, s.SlotUtil, c.SlotUtil)
			}
			if c.GeneratedTokens != s.GeneratedTokens {
				t.Errorf("%s width %d: modes generated %d and %d tokens from the same requests", w, width, c.GeneratedTokens, s.GeneratedTokens)
			}
		}
	}
	// The burst admits a group's requests together, so in the tiny suite
	// none finds another's prefix cached yet: see BENCHMARKS.md.
	if on, off := find(t, rep, SharedBurst, ModeCacheOn), find(t, rep, SharedBurst, ModeCacheOff); on.PrefillTokens > off.PrefillTokens {
		t.Errorf("shared-prefix-burst: cache on computed %d prompt tokens, off %d", on.PrefillTokens, off.PrefillTokens)
	}
	for _, w := range []string{SharedPref, ChatName} {
		on, off := find(t, rep, w, ModeCacheOn), find(t, rep, w, ModeCacheOff)
		if on.PrefillTokens >= off.PrefillTokens || on.HitRate == 0 || off.HitRate != 0 {
			t.Errorf("%s: cache on computed %d prompt tokens (hit %.2f), off %d (hit %.2f)", w, on.PrefillTokens, on.HitRate, off.PrefillTokens, off.HitRate)
		}
	}
	if b := find(t, rep, BeamName, ModeCacheOn); b.PeakRunning != 3*4 {
		t.Errorf("beam: peak %d sequences, want 3 searches x 4 beams", b.PeakRunning)
	}
	pg, ct := find(t, rep, KVName, ModePaged), find(t, rep, KVName, ModeContiguous)
	if pg.PeakRunning <= ct.PeakRunning || pg.KVEfficiency <= ct.KVEfficiency {
		t.Errorf("kv-alloc: paged %d seqs at %.2f efficiency, contiguous %d at %.2f", pg.PeakRunning, pg.KVEfficiency, ct.PeakRunning, ct.KVEfficiency)
	}
	ws, _ := Suite(Tiny, 1, KVName)
	want := 0
	for _, r := range ws[0].Requests {
		want += r.Output
	}
	if pg.GeneratedTokens != want || ct.GeneratedTokens != want {
		t.Errorf("kv-alloc: generated %d and %d tokens, the script says %d", pg.GeneratedTokens, ct.GeneratedTokens, want)
	}
	if len(rep.Targets()) != 7 {
		t.Errorf("targets: %+v", rep.Targets())
	}
}

func TestReportRoundTrip(t *testing.T) {
	rep := tinyReport(t)
	rep.Command, rep.Model = "prefixd bench --tiny", "null"
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Results, rep.Results) || got.Machine != rep.Machine || !got.Started.Equal(rep.Started) || got.Command != rep.Command {
		t.Fatal("the report changed in a JSON round trip")
	}
	if _, err := ReadJSON(strings.NewReader(`{"bogus": 1}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestTableAndMarkdown(t *testing.T) {
	rep := tinyReport(t)
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(rep.Results)+1 {
		t.Fatalf("table has %d lines for %d results", n, len(rep.Results))
	}
	md := rep.Markdown([]string{"docs/bench/throughput.png"})
	for _, want := range []string{"### Targets", "| skew-seed | continuous/w2 |", "![throughput](docs/bench/throughput.png)"} {
		if !strings.Contains(md, want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md)
		}
	}
	doc := "# Benchmarks\n\nintro\n\n" + MarkBegin + "\nold\n" + MarkEnd + "\n\nnotes\n"
	got := SpliceMarkdown(doc, "new\n")
	if want := "# Benchmarks\n\nintro\n\n" + MarkBegin + "\nnew\n" + MarkEnd + "\n\nnotes\n"; got != want {
		t.Fatalf("splice:\n%q\nwant\n%q", got, want)
	}
	if again := SpliceMarkdown(got, "new\n"); again != got {
		t.Fatal("splicing the same text twice changed the document")
	}
	if fresh := SpliceMarkdown("# B", "x\n"); fresh != "# B\n"+MarkBegin+"\nx\n"+MarkEnd+"\n" {
		t.Fatalf("splice into a document without markers: %q", fresh)
	}
}

func TestPlots(t *testing.T) {
	rep := tinyReport(t)
	dir := t.TempDir()
	names, err := rep.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(barMetrics) {
		t.Fatalf("wrote %v", names)
	}
	for _, n := range names {
		isPNG(t, dir+"/"+n)
	}
}

func isPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("%s is not a PNG (%v)", path, err)
	}
}

// TestTargetsNotApplicableWhenTiny: a report run at Tiny sizes marks
// every goal not applicable, in Targets, its Status and the markdown; the
// same results in a Default-size report are judged met or MISSED.
func TestTargetsNotApplicableWhenTiny(t *testing.T) {
	rep := *tinyReport(t) // a copy: the cached report stays as it is
	rep.Tiny = false
	judged := rep.Targets()
	rep.Tiny = true
	tiny := rep.Targets()
	if len(tiny) == 0 || len(tiny) != len(judged) {
		t.Fatalf("%d targets at tiny sizes, %d judged", len(tiny), len(judged))
	}
	for i, tg := range tiny {
		if !tg.NotApplicable || tg.Status() != "n/a" || tg.Name != judged[i].Name || tg.Got != judged[i].Got {
			t.Errorf("tiny target %+v: want n/a, as judged %+v", tg, judged[i])
		}
		if s := judged[i].Status(); judged[i].NotApplicable || s != map[bool]string{true: "met", false: "MISSED"}[judged[i].Met] {
			t.Errorf("default-size target %+v: status %q", judged[i], s)
		}
	}
	md := rep.Markdown(nil)
	if n := strings.Count(md, "| n/a (tiny sizes) |"); n != len(tiny) {
		t.Errorf("markdown has %d n/a rows, want %d:\n%s", n, len(tiny), md)
	}
}

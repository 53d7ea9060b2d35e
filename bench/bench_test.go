package bench

import (
	"bytes"
	"context"
	"os"
	"testing"
)

func tinyReport(t *testing.T) *Report {
	t.Helper()
	ws, err := Suite(Tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunSuite(context.Background(), &NullModel{}, 257, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestTinySuite(t *testing.T) {
	rep := tinyReport(t)
	var buf bytes.Buffer
	rep.WriteTable(&buf)
	os.Stdout.Write(buf.Bytes())
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
		b, err := os.ReadFile(dir + "/" + n)
		if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
			t.Fatalf("%s is not a PNG (%v)", n, err)
		}
	}
}

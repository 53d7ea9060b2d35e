package main

import (
	"fmt"
	"io"
	"time"
)

// progressEvery is how often a long job reports on stderr: often enough
// to show it is alive, rarely enough not to flood a log.
const progressEvery = 2 * time.Second

// loadProgressEvery is how often serve logs that the model is still
// loading; a test shortens it.
var loadProgressEvery = progressEvery

// progress reports a long job's advance on stderr: at most one line per
// every, the first only once every has passed, so a quick job prints
// nothing. It is not safe for concurrent use.
type progress struct {
	w     io.Writer
	label string // what the job is, e.g. "gen-model: writing m.gguf"
	every time.Duration
	now   func() time.Time // time.Now, or a test's clock

	start, next time.Time
}

// newProgress starts reporting a job named label to w.
func newProgress(w io.Writer, label string) *progress {
	return startProgress(w, label, progressEvery, time.Now)
}

// startProgress is newProgress with its interval and clock given.
func startProgress(w io.Writer, label string, every time.Duration, now func() time.Time) *progress {
	p := &progress{w: w, label: label, every: every, now: now}
	p.start = now()
	p.next = p.start.Add(every)
	return p
}

// report writes a line of label, what msg returns and the time since the
// start, if one is due; msg is called only then, so a caller may report
// after every small step.
func (p *progress) report(msg func() string) {
	t := p.now()
	if t.Before(p.next) {
		return
	}
	p.next = t.Add(p.every)
	fmt.Fprintf(p.w, "%s: %s (%s)\n", p.label, msg(), t.Sub(p.start).Round(time.Second))
}

// steps returns a func(done, total int) that reports "done of total
// what": the shape of the simulators' Progress hooks.
func (p *progress) steps(what string) func(done, total int) {
	return func(done, total int) {
		p.report(func() string { return fmt.Sprintf("%d of %d %s", done, total, what) })
	}
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// countingWriter counts the bytes written through it and reports them
// to p as "verb N MiB of TOTAL MiB (P%)", without the total when it is not
// above 0. Under an io.TeeReader it counts bytes read.
type countingWriter struct {
	w        io.Writer
	n, total int64
	p        *progress
	verb     string // "wrote", "read"
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.p.report(c.message)
	return n, err
}

// message says how far the bytes have come.
func (c *countingWriter) message() string {
	if c.total <= 0 {
		return c.verb + " " + mib(c.n)
	}
	return fmt.Sprintf("%s %s of %s (%.0f%%)", c.verb, mib(c.n), mib(c.total), 100*float64(c.n)/float64(c.total))
}

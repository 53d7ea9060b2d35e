package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits bound one rendering of a template. A rendering that would pass
// one fails with a *BoundError at that point, having spent at most about
// the bound: every loop iteration, expression, statement and macro call
// of the evaluator, and every item a filter or method visits, counts
// against them before it runs, and every string or list it builds is
// measured before it is built.
type Limits struct {
	// MaxDepth bounds nesting during evaluation: a macro call, a block
	// inside a block or an expression inside an expression each take a
	// level (and about a kilobyte of goroutine stack), as does each level
	// of a list or dict being printed, compared or converted to JSON.
	MaxDepth int
	// MaxSteps bounds the work of a rendering: expressions evaluated,
	// statements run, loop iterations, items visited by filters, methods
	// and comparisons, and each 4 KiB of text scanned or built.
	MaxSteps int
	// MaxOutput bounds the rendered text and any one string the
	// template builds, in bytes.
	MaxOutput int
	// MaxBytes bounds the bytes of all the strings, and 16 per item of
	// all the lists and dicts, a rendering builds, beyond an allowance
	// of 16 times the bytes of the input's text (the messages and Vars).
	MaxBytes int
	// MaxTime bounds a rendering's wall-clock time, checked every 256
	// steps.
	MaxTime time.Duration
}

// DefaultLimits are far above what the chat templates of Llama 3, Qwen3,
// Mistral, Gemma and DeepSeek spend on a conversation of any size the
// server accepts (Qwen3's spends about 60 steps and a depth of 16 per
// message), and far below what hurts the server.
var DefaultLimits = Limits{
	MaxDepth:  500,
	MaxSteps:  5_000_000,
	MaxOutput: 64 << 20,
	MaxBytes:  256 << 20,
	MaxTime:   2 * time.Second,
}

// ErrBound is what a *BoundError is: errors.Is(err, ErrBound) tells a
// rendering stopped by its Limits.
var ErrBound = errors.New("chat template exceeded a bound")

// BoundError is a rendering stopped by one of its Limits.
type BoundError struct {
	Bound string // "recursion depth", "steps", "output size", "bytes built" or "time"
	Limit string // the limit, as configured
}

// Error names the bound and its limit.
func (e *BoundError) Error() string {
	return fmt.Sprintf("chat template exceeded its bound on %s (%s)", e.Bound, e.Limit)
}

// Is makes errors.Is(err, ErrBound) true.
func (e *BoundError) Is(target error) bool { return target == ErrBound }

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.MaxSteps > 0 {
		d.MaxSteps = l.MaxSteps
	}
	if l.MaxOutput > 0 {
		d.MaxOutput = l.MaxOutput
	}
	if l.MaxBytes > 0 {
		d.MaxBytes = l.MaxBytes
	}
	if l.MaxTime > 0 {
		d.MaxTime = l.MaxTime
	}
	return d
}

// budget is what one rendering has left. Its first error sticks: every
// later charge returns it, so a rendering unwinds at once.
type budget struct {
	lim      Limits
	steps    int
	depth    int
	bytes    int // allowance left
	deadline time.Time
	err      error
}

func newBudget(lim Limits, inputBytes int) *budget {
	return &budget{lim: lim, bytes: lim.MaxBytes + 16*inputBytes, deadline: time.Now().Add(lim.MaxTime)}
}

func (b *budget) fail(bound string, limit any) error {
	if b.err == nil {
		b.err = &BoundError{Bound: bound, Limit: fmt.Sprint(limit)}
	}
	return b.err
}

// step charges n steps.
func (b *budget) step(n int) error {
	if b.err != nil {
		return b.err
	}
	before := b.steps
	b.steps += n
	if n < 0 || b.steps > b.lim.MaxSteps || b.steps < before {
		return b.fail("steps", b.lim.MaxSteps)
	}
	if before>>8 != b.steps>>8 && time.Now().After(b.deadline) {
		return b.fail("time", b.lim.MaxTime)
	}
	return nil
}

// scan charges the work of scanning n bytes of text: a step, and one
// more per 4 KiB, so that long texts reach the step and time checks.
func (b *budget) scan(n int) error { return b.step(1 + n>>12) }

// enter takes a level of depth; leave gives it back.
func (b *budget) enter() error {
	if b.err != nil {
		return b.err
	}
	b.depth++
	if b.depth > b.lim.MaxDepth {
		return b.fail("recursion depth", b.lim.MaxDepth)
	}
	return nil
}

func (b *budget) leave() { b.depth-- }

// fits checks that a string of n bytes may be built.
func (b *budget) fits(n int) error {
	if b.err != nil {
		return b.err
	}
	if n < 0 || n > b.lim.MaxOutput {
		return b.fail("output size", fmt.Sprintf("%d bytes", b.lim.MaxOutput))
	}
	return nil
}

// str checks and charges a string of n bytes about to be built.
func (b *budget) str(n int) error {
	if err := b.fits(n); err != nil {
		return err
	}
	return b.charge(n)
}

// items charges a list or dict of n items about to be built.
func (b *budget) items(n int) error {
	if n < 0 || n > b.lim.MaxSteps {
		return b.fail("steps", b.lim.MaxSteps)
	}
	return b.charge(16 * n)
}

func (b *budget) charge(n int) error {
	if b.err != nil {
		return b.err
	}
	b.bytes -= n
	if b.bytes < 0 {
		return b.fail("bytes built", fmt.Sprintf("%d bytes beyond 16 times the input", b.lim.MaxBytes))
	}
	// Building takes time too: a step per 4 KiB.
	return b.step(n >> 12)
}

// writer is the rendering's output (or a macro's, or a block set's),
// bounded by MaxOutput and charged to the budget.
type writer struct {
	b   *budget
	buf strings.Builder
}

func (w *writer) write(s string) error {
	if err := w.b.fits(w.buf.Len() + len(s)); err != nil {
		return err
	}
	if err := w.b.charge(len(s)); err != nil {
		return err
	}
	w.buf.WriteString(s)
	return nil
}

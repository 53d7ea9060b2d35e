package server

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/trace"
)

// maxTraceHeld bounds the finished requests a tracer holds back behind an
// older one still running. Beyond it the oldest is written without its
// output length (ttl-sim then assumes max_tokens), so a very long request
// cannot make the tracer hold an unbounded backlog.
const maxTraceHeld = 4096

// tracer writes Config.Trace: a record per generation request the engine
// accepted, in arrival order, each written once its request has finished
// so that it carries the output length. It is safe for concurrent use; a
// nil *tracer records nothing.
type tracer struct {
	w         *trace.Writer
	tokens    bool // record token IDs instead of block hashes
	blockSize int
	log       *slog.Logger

	wg      sync.WaitGroup // one per request not yet finished
	mu      sync.Mutex
	queue   []*traced // arrival order; the head is the next to write
	held    int       // finished entries in queue
	errSeen bool
}

// traced is one request's record while it waits to be written.
type traced struct {
	rec      trace.Record
	finished bool
	written  bool
}

func newTracer(w *trace.Writer, tokens bool, blockSize int, log *slog.Logger) *tracer {
	if w == nil {
		return nil
	}
	return &tracer{w: w, tokens: tokens, blockSize: blockSize, log: log}
}

// record notes the arrival of req, which the engine has accepted as st,
// and writes its record once st finishes. The caller must not modify req's
// prompt afterwards.
func (t *tracer) record(req *engine.Request, st *engine.Stream) {
	if t == nil {
		return
	}
	e := &traced{rec: trace.Record{
		Namespace: req.Namespace,
		TTLms:     req.Cache.TTL.Milliseconds(),
		Priority:  req.Cache.Priority,
		CacheOff:  req.Cache.Disabled,
		MaxTokens: req.MaxTokens,
	}}
	if t.tokens {
		e.rec.Tokens = req.Prompt
	} else {
		e.rec.Blocks = trace.BlockHashes(req.Namespace, req.Prompt, t.blockSize)
		e.rec.BlockSize, e.rec.PromptTokens = t.blockSize, len(req.Prompt)
	}
	t.wg.Add(1)
	t.mu.Lock()
	// Taken under the lock, arrival times follow the queue's order.
	e.rec.At = t.w.Since(time.Now())
	t.queue = append(t.queue, e)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		<-st.Done()
		res := st.Result()
		t.finish(e, res.Usage.CompletionTokens)
	}()
}

// finish marks e finished and writes every record at the head of the
// queue that may go.
func (t *tracer) finish(e *traced, outputTokens int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.rec.OutputTokens = outputTokens
	e.finished = true
	if !e.written {
		t.held++
	}
	for len(t.queue) > 0 {
		head := t.queue[0]
		switch {
		case head.written:
		case head.finished:
			t.write(head)
			t.held--
		case t.held > maxTraceHeld:
			t.write(head)
		default:
			return
		}
		t.queue[0] = nil
		t.queue = t.queue[1:]
	}
}

// write writes e; t.mu must be held.
func (t *tracer) write(e *traced) {
	e.written = true
	if err := t.w.Write(e.rec); err != nil && !t.errSeen {
		t.errSeen = true
		t.log.Error("writing the trace; later records are lost", "err", err)
	}
}

// wait returns once every accepted request's record has been written.
func (t *tracer) wait() {
	if t != nil {
		t.wg.Wait()
	}
}

package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/valyala/fasthttp"
)

// submit queues req under a context that outlives the RequestCtx: the
// caller must call cancel once it no longer wants the result.
func (s *Server) submit(req engine.Request) (*engine.Stream, context.CancelFunc, error) {
	streams, cancel, err := s.submitChoices(req)
	if err != nil {
		return nil, nil, err
	}
	return streams[0], cancel, nil
}

// result waits for a non-streaming request's result and, if it failed,
// answers with its error. ok is false when there is nothing more to write:
// the request failed, or its client hung up.
func (s *Server) result(ctx *fasthttp.RequestCtx, st *engine.Stream, cancel context.CancelFunc) (res engine.Result, ok bool) {
	res, gone := s.await(ctx, st, cancel)
	accessOf(ctx).result = &res
	if gone {
		return res, false // nobody to answer
	}
	if e := resultError(&res); e != nil {
		s.writeError(ctx, e)
		return res, false
	}
	return res, true
}

// hangupPoll is how often a non-streaming request checks that its client
// is still connected.
const hangupPoll = 100 * time.Millisecond

// continueProbe is the interim response await writes to a client that
// sent FIN: any HTTP/1.1 client reads past a 1xx response to the final one
// (RFC 9110, section 15.2), and a client that has closed its socket
// answers the bytes with a reset.
const continueProbe = "HTTP/1.1 100 Continue\r\n\r\n"

// await waits for a non-streaming request's result. fasthttp tells a
// handler nothing when its client disconnects, so await peeks at the
// connection every hangupPoll and cancels the request once the client has
// hung up (gone); the engine then frees its blocks at its next iteration.
// For HTTP/1.1, only a reset or a failed write is a hang-up: a client may
// shut down its sending side once its request is out (curl scripts, some
// proxies) and still read the answer. On FIN, await writes continueProbe
// once, which a closed socket resets; the connection's earlier answers
// have all been flushed (serveHTTP sees to it), so the probe never lands
// inside one. An HTTP/1.0 client may not be sent a 1xx response (RFC 9110,
// section 15.2), so for it a FIN is the hang-up.
func (s *Server) await(ctx *fasthttp.RequestCtx, st *engine.Stream, cancel context.CancelFunc) (res engine.Result, gone bool) {
	tick := time.NewTicker(hangupPoll)
	defer tick.Stop()
	w := hangupWatch{conn: ctx.Conn(), finIsHangup: !ctx.Request.Header.IsHTTP11()}
	for {
		select {
		case <-st.Done():
			return st.Result(), false
		case <-tick.C:
			if w.hungUp() {
				cancel()
				s.metrics.hangups.Inc()
				s.log.Debug("client hung up; request cancelled", "path", string(ctx.Path()))
				return st.Result(), true
			}
		}
	}
}

// hangupWatch looks for one request's client hanging up.
type hangupWatch struct {
	conn        net.Conn
	finIsHangup bool // a FIN alone is a hang-up (HTTP/1.0)
	probed      bool // continueProbe has been written
}

// hungUp reports whether the client has closed its connection. On the
// first FIN it sees it writes continueProbe and looks again at once: a
// client on the same host has usually reset before the write returns, any
// other is seen at the next look.
func (w *hangupWatch) hungUp() bool {
	reset, eof := peek(w.conn)
	if eof && w.finIsHangup {
		return true
	}
	if eof && !w.probed {
		w.probed = true
		if _, err := io.WriteString(w.conn, continueProbe); err != nil {
			return true
		}
		reset, _ = peek(w.conn)
	}
	return reset
}

// sseFormat shapes a stream's events; token returning nil sends no event.
type sseFormat struct {
	token func(tok int32, text string) any
	final func(res *engine.Result, rest string) any
}

// streamSSE answers with server-sent events: one per token, a final one,
// then [DONE]. Each token event carries the text the engine released with
// the token; the final one carries the rest of Result.Text (text held back
// while it might begin a stop string, when generation ended at EOS), so the
// events' texts concatenate to the non-streaming text. The events are
// written by a goroutine fasthttp starts; a failed write means the client
// is gone, and cancels the request so its blocks are freed at the engine's
// next iteration. Comments are sent while no token comes, so a client that
// leaves while its request is queued is noticed too. An HTTP/1.0 client,
// which cannot read a chunked body, gets the events in a body that ends
// when the connection closes.
func (s *Server) streamSSE(ctx *fasthttp.RequestCtx, id string, st *engine.Stream, cancel context.CancelFunc, f sseFormat) {
	s.serveSSE(ctx, id, cancel, func(w *bufio.Writer) engine.Result { return s.writeEvents(w, id, st, cancel, f) })
}

// serveSSE answers with a stream of server-sent events that events writes
// (returning the request's result, for the access log), over chunked
// HTTP/1.1 or, for an HTTP/1.0 client, a body that ends when the
// connection closes.
func (s *Server) serveSSE(ctx *fasthttp.RequestCtx, id string, cancel context.CancelFunc, events func(w *bufio.Writer) engine.Result) {
	headers := [][2]string{
		{"Content-Type", "text/event-stream"},
		{"Cache-Control", "no-cache"},
		{"X-Accel-Buffering", "no"},
		{"X-Request-Id", id},
	}
	// The access-log line waits until the writer ends: the handler returns
	// first.
	a := accessOf(ctx)
	a.streamed = true
	write := func(w *bufio.Writer) {
		defer cancel()
		res := events(w)
		a.result = &res
		s.logAccess(a, 200)
	}
	if !ctx.Request.Header.IsHTTP11() {
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) {
			if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
				defer s.conns.forget(u.UnsafeConn())
			}
			w := bufio.NewWriter(c)
			w.WriteString("HTTP/1.0 200 OK\r\nServer: prefixd\r\nConnection: close\r\n")
			for _, h := range headers {
				w.WriteString(h[0] + ": " + h[1] + "\r\n")
			}
			w.WriteString("\r\n")
			write(w)
			w.Flush()
		})
		return
	}
	ctx.SetStatusCode(200)
	for _, h := range headers {
		ctx.Response.Header.Set(h[0], h[1])
	}
	ctx.SetBodyStreamWriter(write)
}

// writeEvents writes a stream's events to w until the request ends, or
// the client is gone and it cancels the request, and returns the request's
// result.
func (s *Server) writeEvents(w *bufio.Writer, id string, st *engine.Stream, cancel context.CancelFunc, f sseFormat) engine.Result {
	gone := func() engine.Result {
		s.log.Debug("stream client gone", "id", id)
		cancel()
		return st.Result()
	}
	// An opening comment sends the headers at once, before the first
	// token (fasthttp writes them with the first chunk).
	w.WriteString(": stream " + id + "\n\n")
	if w.Flush() != nil {
		return gone()
	}
	sent := 0 // bytes of text streamed
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case t, ok := <-st.Tokens:
			if !ok {
				res := st.Result()
				if writeEvent(w, f.final(&res, res.Text[min(sent, len(res.Text)):])) != nil {
					return res
				}
				w.WriteString("data: [DONE]\n\n")
				w.Flush()
				return res
			}
			sent += len(t.Text)
			if ev := f.token(t.ID, t.Text); ev != nil {
				if writeEvent(w, ev) != nil {
					return gone()
				}
			}
			// Flush only when caught up: a burst of tokens (a beam
			// result, or a slow reader) goes out in one write.
			if len(st.Tokens) == 0 && w.Flush() != nil {
				return gone()
			}
		case <-tick.C:
			w.WriteString(": keep-alive\n\n")
			if w.Flush() != nil {
				return gone()
			}
		}
	}
}

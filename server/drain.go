package server

import (
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// connSet holds the open client connections and knows which are
// answering a request: from the handler's start until fasthttp has
// written the response (the connection turns idle or closes), or for a
// hijacked one until its handler forgets it. A drain waits for answers
// only, then closes the rest, which fasthttp would otherwise wait for:
// idle keep-alive connections, and ones whose client is still sending a
// request. It is safe for concurrent use.
type connSet struct {
	mu        sync.Mutex
	m         map[net.Conn]bool // true while answering
	answering zeroCount         // connections answering
	open      zeroCount         // connections in m
	closed    bool              // closeAll ran: a connection that arrives later is closed at once
}

// zeroCount is a count with a channel that is closed while it is zero.
type zeroCount struct {
	n    int
	zero chan struct{}
}

func newZeroCount() zeroCount {
	z := zeroCount{zero: make(chan struct{})}
	close(z.zero)
	return z
}

// add adds d (1 or -1) to the count.
func (z *zeroCount) add(d int) {
	if z.n == 0 {
		z.zero = make(chan struct{})
	}
	if z.n += d; z.n == 0 {
		close(z.zero)
	}
}

func newConnSet() *connSet {
	return &connSet{m: map[net.Conn]bool{}, answering: newZeroCount(), open: newZeroCount()}
}

// track is fasthttp's ConnState hook.
func (cs *connSet) track(c net.Conn, state fasthttp.ConnState) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch state {
	case fasthttp.StateNew:
		if cs.closed {
			// Accepted as the listener closed: fasthttp would serve it as
			// if no drain had begun.
			c.Close()
		}
		cs.m[c] = false
		cs.open.add(1)
	case fasthttp.StateIdle:
		cs.setLocked(c, false)
	case fasthttp.StateClosed:
		cs.removeLocked(c)
	}
}

// busy marks c as answering a request; a nil or unknown c (a handler
// called without the server's listener) is ignored.
func (cs *connSet) busy(c net.Conn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, ok := cs.m[c]; ok {
		cs.setLocked(c, true)
	}
}

// forget drops a hijacked connection once its handler is done with it.
func (cs *connSet) forget(c net.Conn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.removeLocked(c)
}

func (cs *connSet) removeLocked(c net.Conn) {
	if _, ok := cs.m[c]; !ok {
		return
	}
	cs.setLocked(c, false)
	delete(cs.m, c)
	cs.open.add(-1)
}

func (cs *connSet) setLocked(c net.Conn, answering bool) {
	was, ok := cs.m[c]
	if !ok || was == answering {
		return
	}
	cs.m[c] = answering
	if answering {
		cs.answering.add(1)
	} else {
		cs.answering.add(-1)
	}
}

// idle returns a channel closed once no connection is answering.
func (cs *connSet) idle() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.answering.zero
}

// empty returns a channel closed once no connection is open: fasthttp
// (or a hijack handler) is done with every one.
func (cs *connSet) empty() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.open.zero
}

// closeAll closes every connection, and each that arrives later; each
// then leaves the set when fasthttp (or its hijack handler) sees it
// closed.
func (cs *connSet) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for c := range cs.m {
		c.Close()
	}
}

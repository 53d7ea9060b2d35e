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
	answering int
	none      chan struct{} // closed while answering == 0
}

func newConnSet() *connSet {
	cs := &connSet{m: map[net.Conn]bool{}, none: make(chan struct{})}
	close(cs.none)
	return cs
}

// track is fasthttp's ConnState hook.
func (cs *connSet) track(c net.Conn, state fasthttp.ConnState) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch state {
	case fasthttp.StateNew:
		cs.m[c] = false
	case fasthttp.StateIdle:
		cs.setLocked(c, false)
	case fasthttp.StateClosed:
		cs.setLocked(c, false)
		delete(cs.m, c)
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
	cs.setLocked(c, false)
	delete(cs.m, c)
}

func (cs *connSet) setLocked(c net.Conn, answering bool) {
	was, ok := cs.m[c]
	if !ok || was == answering {
		return
	}
	cs.m[c] = answering
	if answering {
		if cs.answering == 0 {
			cs.none = make(chan struct{})
		}
		cs.answering++
		return
	}
	if cs.answering--; cs.answering == 0 {
		close(cs.none)
	}
}

// idle returns a channel closed once no connection is answering.
func (cs *connSet) idle() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.none
}

// closeAll closes every connection; each then leaves the set when fasthttp
// (or its hijack handler) sees it closed.
func (cs *connSet) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.m {
		c.Close()
	}
}

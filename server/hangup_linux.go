package server

import (
	"errors"
	"net"
	"syscall"
)

// hungUp reports whether the client of conn has closed the connection: a
// non-blocking peek at the socket reads end-of-file or a reset. It
// consumes nothing, so fasthttp's own reading of later requests on the
// connection is undisturbed. A client that only half-closes (shuts down
// its sending side while still reading) looks gone too; HTTP clients do
// not do that.
func hungUp(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = n == 0 && err == nil || errors.Is(err, syscall.ECONNRESET)
		return true // never wait for data
	})
	return gone
}

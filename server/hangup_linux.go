package server

import (
	"errors"
	"net"
	"syscall"
)

// peek looks at conn's socket without blocking and without consuming
// data, so fasthttp's own reading of later requests on the connection is
// undisturbed. reset reports that the client reset the connection: a
// reset read, or a pending socket error (a reset that comes after the
// client's FIN is kept as EPIPE, which reads past end-of-file never
// report). eof reports that the client sent FIN: it either closed the
// connection or only shut down its sending side (a half-close) and still
// reads its answer, which no read can tell apart.
func peek(conn net.Conn) (reset, eof bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		reset = errors.Is(err, syscall.ECONNRESET)
		eof = n == 0 && err == nil
		if soErr, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ERROR); err == nil && soErr != 0 {
			reset = true
		}
		return true // never wait for data
	})
	return reset, eof
}

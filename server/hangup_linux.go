package server

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peek looks at conn's socket without blocking and without consuming
// data, so fasthttp's own reading of later requests on the connection is
// undisturbed. reset reports that the client reset the connection. The
// kernel's TCP state says so for good: a reset moves the socket to CLOSE
// whether it came before or after the client's FIN, and stays there,
// whereas the socket's pending error (ECONNRESET, or EPIPE after a FIN) is
// cleared by the first read that reports it, and a read past end-of-file
// never reports it at all. eof reports that the client sent FIN and no
// further data: it either closed the connection or only shut down its
// sending side (a half-close) and still reads its answer, which no read
// can tell apart.
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
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		reset = errors.Is(err, unix.ECONNRESET)
		eof = n == 0 && err == nil
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && info.State == unix.BPF_TCP_CLOSE {
			reset = true
		}
		return true // never wait for data
	})
	return reset, eof
}

//go:build !linux

package server

import "net"

// peek sees nothing off Linux: a non-streaming request whose client
// leaves then runs to its end (streams notice at their next write).
func peek(net.Conn) (reset, eof bool) { return false, false }

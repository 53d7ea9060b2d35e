//go:build !linux

package server

import "net"

// hungUp always reports false off Linux: a non-streaming request whose
// client leaves then runs to its end (streams notice at their next write).
func hungUp(net.Conn) bool { return false }

//go:build !unix

package replication

import "net"

// connAlive cannot peek on this platform; a closed connection is detected
// when used.
func connAlive(net.Conn) bool { return true }

// bytesWaiting cannot peek on this platform either: it reports false.
func bytesWaiting(net.Conn) bool { return false }

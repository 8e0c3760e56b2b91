// Package testnet holds network helpers shared by the tests of several
// packages.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package testnet

import "net"

// NonLoopbackIP returns an IPv4 address of an up, non-loopback interface
// of this machine, or nil: tests of protected mode connect from it to be
// seen as a remote client.
func NonLoopbackIP() net.IP {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				return n.IP
			}
		}
	}
	return nil
}

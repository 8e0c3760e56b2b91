//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// fitOpenFiles raises the soft RLIMIT_NOFILE as far as maxclients and
// reserved need and the hard limit allows, and returns the maxclients the
// result allows.
func fitOpenFiles(maxclients, reserved int) (fdPlan, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fdPlan{MaxClients: maxclients}, nil // unknown: trust the configuration
	}
	p, err := planFDs(maxclients, reserved, uint64(lim.Cur), uint64(lim.Max))
	if err != nil || p.Soft == uint64(lim.Cur) {
		return p, err
	}
	next := lim
	setLimit(&next.Cur, p.Soft)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		// Keep the current limit and fit maxclients to it.
		return planFDs(maxclients, reserved, uint64(lim.Cur), uint64(lim.Cur))
	}
	return p, nil
}

// liveMaxClients returns CONFIG SET maxclients' check, for a server that
// keeps reserved descriptors: it raises the soft limit for n clients if it
// can, and refuses n otherwise (Redis's wording).
func liveMaxClients(reserved int) func(n int) error {
	return func(n int) error {
		p, err := fitOpenFiles(n, reserved)
		if err != nil || p.MaxClients < n {
			try := p.MaxClients
			return fmt.Errorf("The operating system is not able to handle the specified number of clients, try with %d", max(try, 1))
		}
		return nil
	}
}

// setLimit stores v into an rlimit field, which is a uint64 on most
// systems and an int64 on some BSDs.
func setLimit[T int64 | uint64](dst *T, v uint64) { *dst = T(v) }

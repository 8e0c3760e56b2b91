package authguard

import "time"

// Outcome is what one authentication attempt (Guard.Attempt) came to.
type Outcome struct {
	// OK: the password was right.
	OK bool
	// Throttled: refused without the password checked. Full says why:
	// the address's schedule is QueueMax ahead; else the caller could not
	// wait, or its wait was cut short.
	Throttled, Full bool
	// Close: close the connection after the reply (throttled, or
	// ConnFailures failures in a row on it).
	Close bool
	// Fails is the address's failures after a wrong password, and Log
	// whether to log this one (at most one line per LogEvery).
	Fails int
	Log   bool
}

// Attempt runs one authentication attempt from key: the wait the address
// has earned, run by wait (false: it was cut short; nil: the caller cannot
// wait, and an attempt that must is refused and closed instead), then
// check (true: the password is right), and the counters. connFails is the
// connection's consecutive failures, which Attempt updates.
func (g *Guard) Attempt(key string, connFails *int, wait func(time.Duration) bool, check func() bool) Outcome {
	d, ok := g.Schedule(key)
	switch {
	case !ok:
		g.CountDisconnect()
		return Outcome{Throttled: true, Full: true, Close: true}
	case d > 0 && wait == nil:
		g.CountDisconnect()
		return Outcome{Throttled: true, Close: true}
	case d > 0 && !wait(d):
		return Outcome{Throttled: true, Close: true}
	}
	if check() {
		g.Succeed(key)
		*connFails = 0
		return Outcome{OK: true}
	}
	*connFails++
	fails, log := g.Fail(key)
	out := Outcome{Fails: fails, Log: log, Close: *connFails >= ConnFailures}
	if out.Close {
		g.CountDisconnect()
	}
	return out
}

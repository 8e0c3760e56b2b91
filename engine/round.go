package engine

import "math/bits"

// CellSeconds converts a duration in nanoseconds to the whole seconds
// CL.THROTTLE replies with, exactly as redis-cell does: truncate to whole
// seconds, then add one when the sub-second remainder is at least 1 ms (so
// a client that waits the reply's number of seconds is almost never early,
// while a remainder below 1 ms is dropped). ns is -1 (never / not
// applicable), which stays -1, or in [0, 2^63).
//
// redis-cell truncates the duration as float64 seconds (seconds +
// nanoseconds/1e9). For durations of 2^24 s (194 days) or more, a
// sub-second part within half a float64 unit of the next second rounds up
// to it there; CellSeconds reproduces that in integers, so the replies match
// for every duration.
func CellSeconds(ns int64) int64 {
	if ns == -1 {
		return -1
	}
	s, sub := ns/1e9, ns%1e9
	if s > 0 {
		// s + sub/1e9 rounds up to s+1 when 1 − sub/1e9 is below half the
		// unit in the last place of s, 2^(b−54) for s of b bits; no case is
		// a tie, since 1e9 × 2^(b−54) is never an integer here.
		if b := bits.Len64(uint64(s)); 1e9-sub <= int64(1e9)>>(54-b) {
			s++
		}
	}
	if sub >= 1e6 {
		s++
	}
	return s
}

// CeilMillis converts a duration in nanoseconds to whole milliseconds,
// rounded up, so that a client that waits that long is never too early.
// Every limiter command other than CL.THROTTLE replies in these units.
// ns is -1 (never / not applicable), which stays -1, or in [0, 2^63).
func CeilMillis(ns int64) int64 {
	if ns == -1 {
		return -1
	}
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

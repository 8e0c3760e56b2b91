package engine

import (
	"slices"
	"time"
)

// Units and instants shared by every test of the package.
const (
	ms     = int64(time.Millisecond)
	sec    = int64(time.Second)
	minute = int64(time.Minute)
	hour   = int64(time.Hour)
)

// t0 is an arbitrary start instant (2026-11-22, plus a few odd nanoseconds so
// nothing lines up with whole seconds by accident).
const t0 = int64(1795305600)*sec + 123456789

// maxNow bounds the simulated clock: times must stay below 2^63 − MaxSpan
// (2^62) so that now + any span fits in int64.
const maxNow = 1 << 62

// args turns strings into a command's argument list.
func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte(s[i])
	}
	return out
}

// live reports whether st is stored at now (not missing, not expired).
func live(st State, now int64) bool { return st.Kind != KindNone && st.ExpireAt > now }

// stored is what the store keeps of a returned state at now: the state
// while it is live, and a missing key (the zero State) once it is fresh.
func stored(st State, now int64) State {
	if !live(st, now) {
		return State{}
	}
	return st
}

// equalState reports whether a and b are identical, field by field and
// entry by entry.
func equalState(a, b State) bool {
	return a.Kind == b.Kind && a.ExpireAt == b.ExpireAt && a.A == b.A && a.B == b.B && a.C == b.C &&
		slices.Equal(a.Log, b.Log)
}

// sameState reports whether a and b are the same stored state at now: both
// absent (missing or expired), or identical.
func sameState(a, b State, now int64) bool {
	la, lb := live(a, now), live(b, now)
	if !la || !lb {
		return la == lb
	}
	return equalState(a, b)
}

// cloneState deep-copies st, so that an Apply that reuses the log's backing
// array cannot disturb the copy a check keeps.
func cloneState(st State) State {
	st.Log = slices.Clone(st.Log)
	return st
}

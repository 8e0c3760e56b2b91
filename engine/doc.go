// Package engine holds cellserver's rate-limiting algorithms as pure,
// deterministic functions of (stored state, request parameters, now).
//
// Nothing in this package reads a clock, takes a lock, logs, counts a metric or
// performs I/O: time enters as an argument, so that in a cluster every replica
// applies the instant the leader stamped into the log. Every stored quantity is
// an integer (no floating point), and products that can exceed 64 bits are
// computed with 128-bit intermediates (uint128.go), so that two replicas
// applying the same requests at the same instants hold bit-identical state.
//
// Times are int64 nanoseconds since the Unix epoch, in [0, 2^62); durations
// are int64 nanoseconds. The package has no mutable package-level state, so
// every function is safe for concurrent use; callers serialise the calls that
// share one key's State (see Apply).
//
// Each limiter's file documents its state layout (the meaning of State's A, B
// and C), the bound on what it admits in any interval, and where its replies
// are exact.
package engine

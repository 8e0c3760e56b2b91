// Package engine holds cellserver's rate-limiting algorithms as pure,
// deterministic functions of (stored state, request parameters, now).
//
// Nothing in this package reads a clock, takes a lock, logs, counts a metric or
// performs I/O. Every stored quantity is an integer (no floating point), and
// products that can exceed 64 bits are computed with 128-bit intermediates
// (math/bits), so that two replicas applying the same requests at the same
// instants hold bit-identical state.
//
// Times are int64 nanoseconds since the Unix epoch; durations are int64
// nanoseconds.
package engine

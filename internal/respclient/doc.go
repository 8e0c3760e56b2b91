// Package respclient is the one RESP client cellserver uses to talk to
// another server as a Redis client would: MIGRATE's exchanges with its
// target, and a joining node's RAFT.HELLO / RAFT.JOIN.
//
// It speaks RESP2 (simple strings, errors, integers, bulk strings, arrays,
// null bulk and null array) and trusts nothing it reads: every reply must
// arrive whole within the call's timeout (a peer that trickles a byte a
// second fails like one that never answers), a line, a bulk string and an
// array are bounded, and anything that is not RESP is a protocol error.
// A Client is one connection, used by one goroutine at a time.
package respclient

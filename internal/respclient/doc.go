// Package respclient is the one RESP client cellserver uses to talk to
// another server as a Redis client would. Its users: region links
// (region: REGION.EXEC and REGION.APPLY to peer regions), MIGRATE's
// exchange with its target and the check of another group's members for
// a slot's keys (resp), a joining node's RAFT.HELLO / RAFT.JOIN
// (replication), and cellserver --assign-slots, which joins groups into
// one cluster (cmd/cellserver).
//
// It speaks RESP2 (simple strings, errors, integers, bulk strings, arrays,
// null bulk and null array) and trusts nothing it reads: every reply must
// arrive whole within the call's timeout (a peer that trickles a byte a
// second fails like one that never answers), a line, a bulk string and an
// array are bounded, and anything that is not RESP is a protocol error.
// A Client is one connection, used by one goroutine at a time.
//
// An error reply is decoded here, once, and nowhere else (replyerr.go):
// Value.Err returns a *ReplyError (its code and text) that unwraps to a
// typed error, for errors.Is and errors.As — sentinels for the codes
// without data (ErrTryAgain, ErrClusterDown, ErrLoading, ErrOOM,
// ErrNoAuth, ErrWrongPass, ErrReadOnly, ErrBusyKey), structs for those
// with data (*MovedError and *AskError: slot and address;
// *OutOfSequenceError: the batch a region peer's lane expects). Callers
// act on those, never on the text; Follow is the one place MOVED is
// followed.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package respclient

// Package resp is cellserver's wire layer: a RESP2/RESP3 server whose
// commands come from one table. A command's metadata (name, arity, flags,
// key positions, documentation) is data in resp/commands/*.json, generated
// into commands_gen.go; its handler is bound to it by name in handlers.go.
// COMMAND, COMMAND INFO/DOCS and docs/commands.md are generated from that
// table.
//
// Commands execute on a decide.Backend, the decision path every front
// door shares (package decide): decide.Local applies them to a
// shards.Store directly (standalone); the cluster's node replicates writes
// through Raft; a region gate may sit in front of either.
// A connection's pipelined write commands are gathered into one
// Backend.Write call, so that the cluster can commit them as one log entry;
// replies keep the order of the commands.
//
// The connection loop parses RESP and inline commands itself, into a reused
// buffer (no allocation per command in the steady state), with Redis's
// protocol limits (bulk length, argument count, inline size), and encodes
// replies with RESP2 or RESP3 framing in one place (writer.go). Errors become
// replies in one function (appendErrorText), in Redis's wording.
//
// A Server starts with Serve or ListenAndServe and stops with Shutdown
// (graceful: replies in flight are flushed) or Close; every goroutine it
// started has exited when either returns.
package resp

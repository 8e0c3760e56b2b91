// Package txqueue is a connection's transaction (MULTI … EXEC) as a model:
// the queue of commands, each with a copy of its arguments; its bounds
// (transaction-max-commands, transaction-max-bytes and
// client-query-buffer-limit); the order rule of its reads and writes; and
// the estimate of EXEC's reply size checked before anything runs.
//
// resp's MULTI, EXEC and DISCARD handlers parse, route and reply; what
// this package decides they word (resp's errors.go). A Queue belongs to one
// connection and is not safe for concurrent use.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages (checked by internal/layers); it
// must never import resp.
package txqueue

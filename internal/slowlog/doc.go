// Package slowlog owns the log of slow commands (SLOWLOG): the threshold
// and length settings, the ring of the newest entries, and how an entry's
// arguments are clipped (Redis's SLOWLOG_ENTRY_MAX_ARGC and
// SLOWLOG_ENTRY_MAX_STRING). Which arguments carry secrets is the caller's
// knowledge (a redact function). It must never import resp (or any package
// of the server); resp's SLOWLOG handler reads it.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages (checked by internal/layers).
package slowlog

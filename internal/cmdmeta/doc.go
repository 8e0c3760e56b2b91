// Package cmdmeta reads the RESP command metadata kept as data in
// resp/commands/*.json (one file per command or command family, as Redis
// keeps src/commands/*.json), checks it, and generates from it the Go
// source of resp's command table metadata (resp/commands_gen.go). The
// handlers stay Go code in package resp, bound to the metadata by name.
//
// It also holds what the metadata says beyond the table: the contents of
// COMMAND INFO and COMMAND DOCS replies (Info, Docs: an internal/reply
// tree resp writes), a call's keys by the key positions (Command.Keys), the
// command flags (Flags, from which resp's constants are generated), the
// syntax lines (Syntax) and docs/commands.md (Markdown).
//
// It imports nothing of the project but internal/reply, and must never
// import resp (which it generates for) or any server package. Load and Generate run at `go
// generate` time (the gen command) and in resp's tests, never in the
// server. The schema is Command and Arg; Load reports every fault as an
// *Error naming the file and the JSON field to fix.
package cmdmeta

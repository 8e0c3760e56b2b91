// Package setting is the one table of cellserver's settings: each one's
// name, kind and parser, range, default, whether CONFIG SET may change it
// live, and help text. The flags, the configuration file and --help
// (cmd/cellserver), CONFIG SET (resp) and docs/configuration.md all come
// from it, so that a range or an error is worded in one place. Registry
// is CONFIG GET's and CONFIG SET's view of the settings in force (live.go):
// every name checked before any value is set, values put back when one is
// refused, a shared Batch applied once; LiveInt, LiveVar and LiveFixed bind a
// server's value to a Live by its Table entry (bind.go), with Redis's log
// level words.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package setting

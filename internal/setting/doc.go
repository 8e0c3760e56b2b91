// Package setting is the one table of cellserver's settings: each one's
// name, kind and parser, range, default, whether CONFIG SET may change it
// live, and help text. The flags, the configuration file and --help
// (cmd/cellserver), CONFIG SET (resp) and docs/configuration.md all come
// from it, so that a range or an error is worded in one place.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package setting

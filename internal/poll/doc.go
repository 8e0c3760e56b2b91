// Package poll is the one polling helper shared by the tests: wait until a
// condition holds or a deadline passes, rather than sleeping a guessed amount.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package poll

// Package poll is the one polling helper shared by the tests: wait until a
// condition holds or a deadline passes, rather than sleeping a guessed amount.
package poll

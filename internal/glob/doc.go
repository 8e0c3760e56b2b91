// Package glob matches keys against Redis's glob patterns (KEYS, SCAN
// MATCH, CONFIG GET, metrics-class), in one place for every package that
// needs them.
package glob

// Package glob matches Redis glob patterns (KEYS, SCAN MATCH, CONFIG GET,
// region-policy): one implementation for every part that needs one.
package glob

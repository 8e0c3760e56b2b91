//go:build race

package shards

// raceEnabled reports whether the race detector is on: the tests that fill
// millions of keys run smaller then.
const raceEnabled = true

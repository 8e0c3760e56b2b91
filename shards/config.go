package shards

import (
	"fmt"
	"runtime"
)

// MaxShards is the largest shard count Config accepts.
const MaxShards = 1 << 16

// Config configures a Store.
type Config struct {
	// Shards is the number of shards, each with its own lock: a power of two
	// in 1..MaxShards, or 0 for the default (the next power of two at or
	// above 16 × runtime.NumCPU(), at most 1024), which keeps lock
	// contention rare without making SCAN and snapshots visit many tiny shards.
	Shards int
}

// DefaultConfig returns the default configuration, with Shards resolved for
// this machine.
func DefaultConfig() Config {
	return Config{Shards: defaultShards()}
}

func defaultShards() int {
	want := 16 * runtime.NumCPU()
	n := 1
	for n < want && n < 1024 {
		n *= 2
	}
	return n
}

// Validate reports whether c is usable by New.
func (c Config) Validate() error {
	if c.Shards == 0 {
		return nil
	}
	if c.Shards < 0 || c.Shards > MaxShards || c.Shards&(c.Shards-1) != 0 {
		return fmt.Errorf("shards: shard count %d is not a power of two in 1..%d", c.Shards, MaxShards)
	}
	return nil
}

// Package shards is cellserver's keyspace: limiter states by key, split into
// a power-of-two number of shards with one lock each.
//
// A key is routed by its 64-bit xxhash: the low bits choose the shard, the
// high 32 bits place it in the shard's open-addressing table, and the key
// bytes are always compared, so hash collisions are never silent. Records are
// pointer-free (only a sliding log's entries live behind a pointer), so the
// garbage collector has almost nothing to scan however many keys are held; a
// GCRA key with an 11-byte name costs about 40 bytes. See DESIGN.md.
//
// Keys expire at their state's ExpireAt: lazily when touched, and actively
// through Sweep / RunSweeper. Writes arrive as Ops (Exec) stamped with an
// instant, so that replicas applying the same Ops reach the same state.
//
// Inspect reads a key's state and last parameters without changing it, and
// Describe says what CL.INSPECT reports of them (a peek, the live leases).
package shards

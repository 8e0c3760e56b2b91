// Package snapshot is cellserver's on-disk snapshot format and its
// standalone persistence.
//
// The format (FORMAT.md beside this file) is a versioned stream: a header
// (magic, version, capture instant, shard count, opaque metadata, its own
// CRC-32C), blocks of key records each with its own CRC-32C, and a trailer
// with the key count and a CRC-32C of everything before it. Encoder and
// Decoder stream it; WriteStore captures a live store shard by shard without
// stopping traffic; Load installs a snapshot into a store only once all of
// it has been verified. The same format serves standalone persistence
// (Persister: SAVE, BGSAVE, periodic saves, load at start-up) and Raft
// snapshots (CaptureStore, Captured.Write, Load, with replication's state in
// the header's metadata).
//
// The package has no mutable package-level state. Its functions may be
// called concurrently with each other and with traffic on the store they
// read (each shard is copied under its own lock); an Encoder, a Decoder or a
// Captured serves one goroutine at a time, and a Persister any number.
package snapshot

package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/cellserver/cellserver/shards"
)

// WriteStats describes a snapshot written by WriteStore or Captured.Write.
type WriteStats struct {
	// Keys is the number of records written.
	Keys uint64
	// Bytes is the size of the snapshot in bytes.
	Bytes int64
}

// WriteStore writes a snapshot of store's keys live at now (Unix ns) to w,
// with meta as the header's metadata. It visits the shards one at a time:
// each is copied under its own lock (shards.Store.Capture) and encoded
// after the lock is released, so traffic on every other shard, and on this
// one once its copy is taken, goes on while the snapshot is written, and
// the extra memory is one shard's copy.
//
// Each shard's records are one consistent state of that shard; different
// shards are copied at successive moments, so the snapshot as a whole is
// not one instant of the store (a key written after its shard was copied
// is not in it). Within a shard records are sorted by key, so equal stores
// give byte-identical snapshots. Errors come from w (wrapped) or from a
// state the store should never hold (ErrInvalidState).
func WriteStore(w io.Writer, store *shards.Store, now int64, meta []byte) (WriteStats, error) {
	enc, err := NewEncoder(w, Header{Created: now, Shards: store.NumShards(), Meta: meta})
	if err != nil {
		return WriteStats{}, err
	}
	var buf []shards.Entry
	for i := 0; i < store.NumShards(); i++ {
		buf = store.Capture(i, now, buf[:0])
		if err := encodeEntries(enc, buf); err != nil {
			return WriteStats{Keys: enc.Count(), Bytes: enc.Size()}, err
		}
	}
	err = enc.Close()
	return WriteStats{Keys: enc.Count(), Bytes: enc.Size()}, err
}

func encodeEntries(enc *Encoder, es []shards.Entry) error {
	slices.SortFunc(es, func(a, b shards.Entry) int { return bytes.Compare(a.Key, b.Key) })
	for i := range es {
		if err := enc.Encode(es[i].Key, &es[i].State); err != nil {
			return err
		}
	}
	return nil
}

// Captured is a copy of a whole store at one instant, taken by CaptureStore
// and written later by Write. It serves a Raft FSM, whose Snapshot must
// capture the state at the last applied entry (cheaply, on the apply path)
// while Persist does the encoding and I/O concurrently with later applies.
type Captured struct {
	now    int64
	shards [][]shards.Entry
}

// CaptureStore copies every key of store live at now, shard by shard, each
// under its own lock. The copy is one instant of the whole store when no
// write runs concurrently (a Raft FSM calls it between two applies). It
// costs memory for all live keys; WriteStore is the streaming alternative
// when one instant is not required.
func CaptureStore(store *shards.Store, now int64) *Captured {
	c := &Captured{now: now, shards: make([][]shards.Entry, store.NumShards())}
	for i := range c.shards {
		c.shards[i] = store.Capture(i, now, nil)
	}
	return c
}

// Len returns the number of keys captured.
func (c *Captured) Len() int {
	n := 0
	for _, s := range c.shards {
		n += len(s)
	}
	return n
}

// Write encodes the capture to w as one snapshot whose Created is the
// capture's now, with meta as its metadata. Records are in the same order
// as WriteStore's (shard, then key), so two equal stores give
// byte-identical snapshots. Write may be called more than once; the
// Captured is not safe for concurrent use.
func (c *Captured) Write(w io.Writer, meta []byte) (WriteStats, error) {
	enc, err := NewEncoder(w, Header{Created: c.now, Shards: len(c.shards), Meta: meta})
	if err != nil {
		return WriteStats{}, err
	}
	for _, es := range c.shards {
		if err := encodeEntries(enc, es); err != nil {
			return WriteStats{Keys: enc.Count(), Bytes: enc.Size()}, err
		}
	}
	err = enc.Close()
	return WriteStats{Keys: enc.Count(), Bytes: enc.Size()}, err
}

// LoadStats describes a snapshot installed by Load.
type LoadStats struct {
	// Header is the snapshot's header.
	Header Header
	// Keys is the number of keys installed.
	Keys int
	// Expired is the number of records dropped because they had expired
	// at the load's now.
	Expired int
	// Bytes is the size of the snapshot in bytes.
	Bytes int64
}

// Load reads a whole snapshot from r and, only once all of it has been
// verified (every block checksum, every record and state, the trailer's key
// count and file checksum), replaces store's contents with it: Flush, then
// one Put per record whose ExpireAt is after now (Unix ns). Records already
// expired at now are dropped. A caller that must not read a clock (a Raft
// replica) passes the snapshot's own time (math.MinInt64 keeps every record;
// Header.Created drops none either, since every record was live then).
//
// On any error store is left untouched: Load never half-loads. To do so
// without holding the snapshot twice in decoded form, it keeps the
// verified block payloads (the snapshot's own compact encoding, about the
// file's size in memory) during verification and decodes them a second
// time while installing. The install itself is not atomic for concurrent
// readers of store (they may see it partly filled); callers load before
// serving, or while no command runs.
func Load(r io.Reader, store *shards.Store, now int64) (LoadStats, error) {
	return load(r, store, now, runtime.GOMAXPROCS(0))
}

// load is Load installing with at most workers goroutines (at least 1).
func load(r io.Reader, store *shards.Store, now int64, workers int) (LoadStats, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return LoadStats{}, err
	}
	d.keep = true
	for {
		if _, _, err = d.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) {
		return LoadStats{}, err
	}
	stats := LoadStats{Header: d.Header(), Bytes: d.Offset()}
	store.Flush()
	// Install with one goroutine per core, each taking every w-th block:
	// Put locks only the key's shard, so they rarely meet. A snapshot holds
	// each key once, so the order of the Puts does not matter.
	w := max(1, min(workers, 8, len(d.kept)))
	counts := make([][2]int, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(d.kept); i += w {
				p := recordParser{buf: d.kept[i], created: d.hdr.Created}
				for p.pos < len(p.buf) {
					key, st, _, err := p.next(nil)
					if err != nil {
						// Verified above; reaching this is a bug in this package.
						errs[g] = fmt.Errorf("snapshot: block %d failed to decode after verification: %w", i, err)
						return
					}
					if st.ExpireAt <= now {
						counts[g][1]++
						continue
					}
					store.Put(key, st)
					counts[g][0]++
				}
				d.kept[i] = nil // let the block go as soon as it is installed
			}
		}()
	}
	wg.Wait()
	for g := range counts {
		stats.Keys += counts[g][0]
		stats.Expired += counts[g][1]
	}
	return stats, errors.Join(errs...)
}

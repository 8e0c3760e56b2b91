package shards

import (
	"math/bits"

	"github.com/cellserver/cellserver/engine"
)

// SCAN. The cursor packs the shard index in its low bits and, above them, a
// position in the shard's table written with its bits reversed, as Redis's
// dictScan does. A shard's table is visited by home bucket: visiting bucket b
// reports every key whose in-shard hash has b in its low bits. With linear
// probing and backward-shift deletion, all keys whose home is b sit in the
// run of occupied slots that starts at b, so a bucket visit reads that run
// and keeps the keys whose home is b. The reverse-binary order then gives
// Redis's guarantee: a key present for the whole iteration is reported at
// least once even if the table doubled or halved meanwhile (a shrink can
// report keys twice).

// scanHoldBuckets bounds the buckets visited under one lock hold.
const scanHoldBuckets = 4096

// Scan visits the keyspace from cursor (0 starts an iteration) and returns
// the cursor to continue from (0 when the iteration is complete). It calls fn
// for about count live keys (at least one bucket is visited; at most
// 10 × count buckets, like Redis), skipping keys expired at now. Every key
// that is live throughout a full iteration is reported at least once; keys
// added or removed meanwhile may or may not be, and a key may be reported
// more than once.
//
// fn runs with the key's shard locked: it must not call the Store, and must
// copy key if it keeps it.
func (s *Store) Scan(cursor uint64, count int, now int64, fn func(key []byte, kind engine.Kind)) uint64 {
	if count < 1 {
		count = 10
	}
	count = min(count, 1<<24) // keeps count × 10 far from overflow
	si := int(cursor & s.mask)
	v := uint32(cursor >> s.shardBits)
	emitted := 0
	budget := count * 10
	for {
		sh := &s.shards[si]
		sh.mu.Lock()
		for held := 0; held < scanHoldBuckets; held++ {
			emitted += sh.scanBucket(v, now, fn)
			budget--
			mask := uint32(len(sh.table) - 1)
			// Increment the reversed cursor (dictScan's trick).
			v |= ^mask
			v = bits.Reverse32(bits.Reverse32(v) + 1)
			if v == 0 || emitted >= count || budget <= 0 {
				break
			}
		}
		sh.mu.Unlock()
		if v == 0 {
			si++
			if si == len(s.shards) {
				return 0
			}
		}
		if emitted >= count || budget <= 0 {
			return uint64(v)<<s.shardBits | uint64(si)
		}
	}
}

// scanBucket reports the live keys whose home bucket is v's low bits.
func (sh *shard) scanBucket(v uint32, now int64, fn func(key []byte, kind engine.Kind)) int {
	mask := uint32(len(sh.table) - 1)
	b := v & mask
	n := 0
	for pos := b; ; pos = (pos + 1) & mask {
		x := sh.table[pos]
		if x == 0 {
			return n
		}
		r := &sh.recs[slotRec(x)]
		if r.h&mask == b && r.w() > now {
			fn(sh.key(r), r.kind())
			n++
		}
	}
}

package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ (and the fuzz seed corpus)")

// t0 is the capture instant of the test snapshots: 2026-01-01T00:00:00Z.
const t0 = int64(1767225600) * 1e9

const sec = int64(1e9)

// sampleEntries returns one or more records of every kind, with the edge
// values the encoding must carry exactly. Every state follows the engine's
// documented layout for its kind.
func sampleEntries() []shards.Entry {
	return []shards.Entry{
		// GCRA: TAT == ExpireAt, 2 s after the capture.
		{Key: []byte("user:1"), State: engine.State{Kind: engine.KindGCRA, ExpireAt: t0 + 2*sec, A: t0 + 2*sec}},
		// The empty key and a binary key.
		{Key: []byte{}, State: engine.State{Kind: engine.KindGCRA, ExpireAt: t0 + 1, A: t0 + 1}},
		{Key: []byte("bin\x00\r\n\xff"), State: engine.State{Kind: engine.KindGCRA, ExpireAt: math.MaxInt64, A: math.MaxInt64}},
		// Token bucket, continuous: full again at A + B/C, so ExpireAt = A+1.
		{Key: []byte("tb:cont"), State: engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0 + 3*sec + 1, A: t0 + 3*sec, B: 2, C: 3}},
		// Token bucket, INTERVAL (C = -1): next refill A, deficit 4 tokens.
		{Key: []byte("tb:interval"), State: engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0 + 8*sec, A: t0 + 4*sec, B: 4, C: -1}},
		// Leaky bucket: empty at A exactly (B = 0), so ExpireAt = A.
		{Key: []byte("lb:1"), State: engine.State{Kind: engine.KindLeakyBucket, ExpireAt: t0 + 500e6, A: t0 + 500e6, B: 0, C: 2}},
		// Fixed window of 1 h, 7 units: A = window start, ExpireAt = A + 1 h.
		{Key: []byte("fw:1"), State: engine.State{Kind: engine.KindFixedWindow, ExpireAt: t0 + 3600*sec, A: t0, B: 7}},
		// Sliding window of 60 s: current 3, previous 9, ExpireAt = A + 2×60 s.
		{Key: []byte("sw:1"), State: engine.State{Kind: engine.KindSlidingWindow, ExpireAt: t0 + 60*sec, A: t0 - 60*sec, B: 3, C: 9}},
		// Sliding log of 10 s: three entries summing to A = 6.
		{Key: []byte("sl:1"), State: engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + 9*sec, A: 6,
			Log: []engine.LogEntry{{At: t0 - 5*sec, Count: 1}, {At: t0 - 2*sec, Count: 3}, {At: t0 - sec, Count: 2}}}},
		// A sliding log at the count limit.
		{Key: []byte("sl:max"), State: engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: engine.MaxCount,
			Log: []engine.LogEntry{{At: t0 - 1, Count: engine.MaxCount}}}},
	}
}

const sampleMeta = "members=n1@127.0.0.1:7001,n2@127.0.0.1:7002;applied=1767225600000000000"

func encodeSnapshot(t testing.TB, hdr Header, es []shards.Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := NewEncoder(&buf, hdr)
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	for i := range es {
		if err := enc.Encode(es[i].Key, &es[i].State); err != nil {
			t.Fatalf("Encode(%q): %v", es[i].Key, err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if enc.Size() != int64(buf.Len()) {
		t.Fatalf("Size() = %d, wrote %d bytes", enc.Size(), buf.Len())
	}
	return buf.Bytes()
}

// sameEntries reports the first difference between two record lists.
func sameEntries(t *testing.T, got, want []shards.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) {
			t.Fatalf("record %d key = %q, want %q", i, got[i].Key, want[i].Key)
		}
		g, w := got[i].State, want[i].State
		if len(g.Log) == 0 && len(w.Log) == 0 {
			g.Log, w.Log = nil, nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("record %d (%q) state = %+v, want %+v", i, want[i].Key, g, w)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	long := bytes.Repeat([]byte("k"), 100_000)
	extremes := []shards.Entry{
		{Key: long, State: engine.State{Kind: engine.KindGCRA, ExpireAt: math.MinInt64 + 1, A: math.MinInt64 + 1}},
		{Key: []byte("neg"), State: engine.State{Kind: engine.KindFixedWindow, ExpireAt: math.MinInt64 + engine.MaxPeriod, A: math.MinInt64, B: engine.MaxCount}},
		{Key: []byte("max"), State: engine.State{Kind: engine.KindSlidingWindow, ExpireAt: math.MaxInt64, A: math.MaxInt64 - 1, B: engine.MaxCount, C: engine.MaxCount}},
		{Key: []byte("tbmax"), State: engine.State{Kind: engine.KindTokenBucket, ExpireAt: math.MaxInt64, A: math.MaxInt64 - 1, B: engine.MaxCount - 1, C: engine.MaxCount}},
	}
	tests := []struct {
		name    string
		created int64
		shards  int
		meta    []byte
		entries []shards.Entry
	}{
		{"empty", t0, 0, nil, nil},
		{"every kind", t0, 16, []byte(sampleMeta), sampleEntries()},
		// Created far from every ExpireAt: the wrapping deltas must still
		// round-trip.
		{"extremes from MaxInt64", math.MaxInt64, MaxShards, []byte{0}, extremes},
		{"extremes from MinInt64", math.MinInt64, 1, nil, extremes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encodeSnapshot(t, Header{Created: tt.created, Shards: tt.shards, Meta: tt.meta}, tt.entries)
			hdr, got, err := readAll(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("readAll: %v", err)
			}
			want := Header{Version: Version, Created: tt.created, Shards: tt.shards, Meta: tt.meta}
			if !reflect.DeepEqual(hdr, want) {
				t.Fatalf("header = %+v, want %+v", hdr, want)
			}
			sameEntries(t, got, tt.entries)
		})
	}
}

// manyEntries returns n valid records of every kind in turn.
func manyEntries(n int) []shards.Entry {
	base := sampleEntries()
	es := make([]shards.Entry, n)
	for i := range es {
		es[i] = base[i%len(base)]
		es[i].Key = fmt.Appendf(nil, "key:%08d", i)
	}
	return es
}

func TestManyBlocks(t *testing.T) {
	es := manyEntries(30_000) // about 1 MB: several 64 KiB blocks
	b := encodeSnapshot(t, Header{Created: t0, Shards: 4}, es)
	d, err := NewDecoder(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var got []shards.Entry
	for {
		key, st, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(got), err)
		}
		got = append(got, shards.Entry{Key: bytes.Clone(key), State: st})
	}
	sameEntries(t, got, es)
	if d.Count() != uint64(len(es)) {
		t.Fatalf("Count() = %d, want %d", d.Count(), len(es))
	}
	// io.EOF is sticky.
	if _, _, err := d.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after EOF = %v, want io.EOF", err)
	}
}

func goldenPath(name string) string { return filepath.Join("testdata", name) }

// leaseEntries are concurrency keys (format version 2): leases with
// generated and given ids, one expired but not yet reclaimed.
func leaseEntries() []shards.Entry {
	return []shards.Entry{
		{Key: []byte("cc:1"), State: engine.State{Kind: engine.KindConcurrency, ExpireAt: t0 + 30*sec, A: 3, B: 2,
			Leases: []engine.Lease{{ID: "job-7", Units: 2, ExpireAt: t0 + 30*sec}, {ID: "abc-2", Units: 1, ExpireAt: t0 - sec}}}},
		{Key: []byte("cc:max"), State: engine.State{Kind: engine.KindConcurrency, ExpireAt: t0 + 1, A: engine.MaxCount,
			Leases: []engine.Lease{{ID: string(make([]byte, engine.MaxLeaseID)), Units: engine.MaxCount, ExpireAt: t0 + 1}}}},
	}
}

// goldenCases are the golden files of every format version. Today's
// encoder must write the current version's files byte for byte; the older
// ones keep being read.
var goldenCases = []struct {
	file    string
	version uint32
	hdr     Header
	entries func() []shards.Entry
}{
	{"v1-small.snap", 1, Header{Created: t0, Shards: 16, Meta: []byte(sampleMeta)}, sampleEntries},
	{"v1-empty.snap", 1, Header{Created: t0, Shards: 1}, func() []shards.Entry { return nil }},
	{"v2-small.snap", 2, Header{Created: t0, Shards: 16, Meta: []byte(sampleMeta)}, func() []shards.Entry { return append(sampleEntries(), leaseEntries()...) }},
	{"v2-empty.snap", 2, Header{Created: t0, Shards: 1}, func() []shards.Entry { return nil }},
}

func TestGolden(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.file, func(t *testing.T) {
			b := encodeSnapshot(t, gc.hdr, gc.entries())
			if *update && gc.version == Version {
				if err := os.WriteFile(goldenPath(gc.file), b, 0o644); err != nil {
					t.Fatal(err)
				}
				writeFuzzSeeds(t, gc.file, b)
			}
			want, err := os.ReadFile(goldenPath(gc.file))
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
			}
			if gc.version == Version && !bytes.Equal(b, want) {
				t.Fatalf("today's encoder differs from %s: %d bytes vs %d, first difference at offset %d",
					gc.file, len(b), len(want), firstDiff(b, want))
			}
			hdr, got, err := readAll(bytes.NewReader(want))
			if err != nil {
				t.Fatalf("decode %s: %v", gc.file, err)
			}
			wantHdr := gc.hdr
			wantHdr.Version = gc.version
			if !reflect.DeepEqual(hdr, wantHdr) {
				t.Fatalf("header = %+v, want %+v", hdr, wantHdr)
			}
			sameEntries(t, got, gc.entries())
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// writeFuzzSeeds stores b and a few truncations of it as FuzzDecode seeds.
func writeFuzzSeeds(t *testing.T, name string, b []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{
		name:                b,
		name + "-header":    b[:min(len(b), headerFixedLen+4)],
		name + "-truncated": b[:len(b)-1],
	}
	for n, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEveryByteFlipDetected flips each byte of the small golden snapshot
// (every bit at once, and the lowest bit alone) and checks that decoding
// fails, and that Load leaves a store untouched.
func TestEveryByteFlipDetected(t *testing.T) {
	good := encodeSnapshot(t, goldenCases[0].hdr, sampleEntries())
	store := newStore(t, 4)
	keep := []shards.Entry{{Key: []byte("existing"), State: engine.State{Kind: engine.KindGCRA, ExpireAt: t0 + 99*sec, A: t0 + 99*sec}}}
	store.Put(keep[0].Key, keep[0].State)
	for i := range good {
		for _, mask := range []byte{0xff, 0x01} {
			b := bytes.Clone(good)
			b[i] ^= mask
			_, _, err := readAll(bytes.NewReader(b))
			if err == nil {
				t.Fatalf("flip 0x%02x at offset %d of %d: decoded without error", mask, i, len(b))
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("flip at offset %d: error %v matches neither ErrCorrupt nor ErrVersion", i, err)
			}
			if _, err := Load(bytes.NewReader(b), store, t0); err == nil {
				t.Fatalf("flip at offset %d: Load succeeded", i)
			}
			sameEntries(t, dump(t, store, t0), keep)
		}
	}
}

func TestEveryTruncationDetected(t *testing.T) {
	good := encodeSnapshot(t, goldenCases[0].hdr, sampleEntries())
	for n := 0; n < len(good); n++ {
		_, _, err := readAll(bytes.NewReader(good[:n]))
		if !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: error %v, want one matching ErrTruncated", n, len(good), err)
		}
	}
	// Data after the trailer is refused too.
	_, _, err := readAll(bytes.NewReader(append(bytes.Clone(good), 0)))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "after the trailer") {
		t.Fatalf("trailing byte: error %v, want data after the trailer", err)
	}
}

func newStore(t testing.TB, n int) *shards.Store {
	t.Helper()
	s, err := shards.New(shards.Config{Shards: n})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dump returns every live key of s at now with its state, sorted by key.
func dump(t testing.TB, s *shards.Store, now int64) []shards.Entry {
	t.Helper()
	var all []shards.Entry
	for i := range s.NumShards() {
		all = append(all, s.Capture(i, now, nil)...)
	}
	sortEntries(all)
	return all
}

func sortEntries(es []shards.Entry) {
	slices.SortFunc(es, func(a, b shards.Entry) int { return bytes.Compare(a.Key, b.Key) })
}

// TestLoadNeverHalfLoads corrupts the last block and then the trailer of a
// multi-block snapshot: Load must fail without touching the store.
func TestLoadNeverHalfLoads(t *testing.T) {
	es := manyEntries(20_000)
	good := encodeSnapshot(t, Header{Created: t0, Shards: 8}, es)
	cases := map[string][]byte{
		"flip in last block": func() []byte { b := bytes.Clone(good); b[len(b)-trailerLen-10] ^= 0x40; return b }(),
		"flip in trailer":    func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 0x01; return b }(),
		"truncated trailer":  good[:len(good)-3],
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 8)
			keep := []shards.Entry{
				{Key: []byte("existing"), State: engine.State{Kind: engine.KindGCRA, ExpireAt: t0 + 99*sec, A: t0 + 99*sec}},
			}
			s.Put(keep[0].Key, keep[0].State)
			if _, err := Load(bytes.NewReader(b), s, t0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load = %v, want an error matching ErrCorrupt", err)
			}
			sameEntries(t, dump(t, s, t0), keep)
		})
	}
}

func TestEncodeRejectsInvalidState(t *testing.T) {
	log := func(es ...engine.LogEntry) []engine.LogEntry { return es }
	tests := []struct {
		name string
		st   engine.State
	}{
		{"kind none", engine.State{ExpireAt: t0 + 1}},
		{"kind 7", engine.State{Kind: 7, ExpireAt: t0 + 1}},
		{"gcra TAT != expiry", engine.State{Kind: engine.KindGCRA, ExpireAt: t0 + 2, A: t0 + 1}},
		{"gcra with B", engine.State{Kind: engine.KindGCRA, ExpireAt: t0, A: t0, B: 1}},
		{"gcra with log", engine.State{Kind: engine.KindGCRA, ExpireAt: t0, A: t0, Log: log(engine.LogEntry{At: t0 - 1, Count: 1})}},
		{"token bucket C = 0", engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0, A: t0}},
		{"token bucket B >= C", engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0 + 1, A: t0, B: 3, C: 3}},
		{"token bucket expiry A+2", engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0 + 2, A: t0, B: 1, C: 3}},
		{"token bucket interval negative deficit", engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0 + 2, A: t0, B: -1, C: -1}},
		{"token bucket interval refill after expiry", engine.State{Kind: engine.KindTokenBucket, ExpireAt: t0, A: t0 + 1, B: 1, C: -1}},
		{"leaky bucket negative B", engine.State{Kind: engine.KindLeakyBucket, ExpireAt: t0, A: t0, B: -1, C: 3}},
		{"fixed window count beyond MaxCount", engine.State{Kind: engine.KindFixedWindow, ExpireAt: t0 + sec, A: t0, B: engine.MaxCount + 1}},
		{"fixed window expiry before start", engine.State{Kind: engine.KindFixedWindow, ExpireAt: t0, A: t0 + 1, B: 1}},
		{"fixed window longer than MaxPeriod", engine.State{Kind: engine.KindFixedWindow, ExpireAt: t0 + engine.MaxPeriod + 1, A: t0, B: 1}},
		{"sliding window negative C", engine.State{Kind: engine.KindSlidingWindow, ExpireAt: t0 + sec, A: t0, B: 1, C: -1}},
		{"sliding log empty", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec}},
		{"sliding log unsorted", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: 2,
			Log: log(engine.LogEntry{At: t0, Count: 1}, engine.LogEntry{At: t0 - 1, Count: 1})}},
		{"sliding log duplicate instant", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: 2,
			Log: log(engine.LogEntry{At: t0, Count: 1}, engine.LogEntry{At: t0, Count: 1})}},
		{"sliding log zero count", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: 0,
			Log: log(engine.LogEntry{At: t0, Count: 0})}},
		{"sliding log sum != A", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: 5,
			Log: log(engine.LogEntry{At: t0, Count: 1})}},
		{"sliding log entry at expiry", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0, A: 1,
			Log: log(engine.LogEntry{At: t0, Count: 1})}},
		{"sliding log sum beyond MaxCount", engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: engine.MaxCount + 1,
			Log: log(engine.LogEntry{At: t0 - 1, Count: engine.MaxCount}, engine.LogEntry{At: t0, Count: 1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			enc, err := NewEncoder(&buf, Header{Created: t0})
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode([]byte("k"), &tt.st); !errors.Is(err, ErrInvalidState) {
				t.Fatalf("Encode(%+v) = %v, want ErrInvalidState", tt.st, err)
			}
			// The encoder stays usable and the snapshot holds nothing of
			// the refused record.
			good := sampleEntries()[0]
			if err := enc.Encode(good.Key, &good.State); err != nil {
				t.Fatalf("Encode after a refusal: %v", err)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, err := readAll(&buf)
			if err != nil {
				t.Fatal(err)
			}
			sameEntries(t, got, []shards.Entry{good})
		})
	}
}

// rawSnapshot builds a snapshot around hand-written block payloads, with
// every checksum correct, to reach the decoder's semantic checks.
func rawSnapshot(created int64, blocks ...[]byte) []byte {
	return rawSnapshotN(created, 1, blocks...)
}

// rawSnapshotN is rawSnapshot with count records claimed per block.
func rawSnapshotN(created int64, count uint32, blocks ...[]byte) []byte {
	var b []byte
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(created))
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	for _, p := range blocks {
		start := len(b)
		b = append(b, tagBlock)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = binary.LittleEndian.AppendUint32(b, count)
		b = append(b, p...)
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
	}
	b = append(b, tagTrailer)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(blocks))*uint64(count))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestDecodeRejectsInvalidRecord feeds records whose checksums are right but
// whose content is not: the decoder must name the problem and its offset.
func TestDecodeRejectsInvalidRecord(t *testing.T) {
	headerLen := int64(headerFixedLen + crcLen)
	payloadOff := headerLen + blockHeadLen
	tests := []struct {
		name    string
		payload []byte
		off     int64 // expected error offset
		what    string
	}{
		// key "k", kind 9, mode 0, four zero varints.
		{"unknown kind", []byte{1, 'k', 9, 0, 0, 0, 0, 0}, payloadOff + 2, "not a limiter kind"},
		{"unknown mode bits", []byte{1, 'k', 1, 0x80, 0, 0, 0, 0}, payloadOff + 3, "unknown bits"},
		// GCRA with A != ExpireAt (ExpireAt = created+1, A = 0 absolute).
		{"invalid gcra state", []byte{1, 'k', 1, 0, 2, 0, 0, 0}, payloadOff, "gcra state"},
		{"key longer than block", []byte{100, 'k', 1, 0, 0, 0, 0, 0}, payloadOff, "key length"},
		{"varint overflow", []byte{1, 'k', 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, payloadOff + 4, "overflows"},
		// A valid GCRA record followed by 7 stray bytes.
		{"stray bytes", []byte{1, 'k', 1, 1, 2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7}, payloadOff + 8, "stray bytes"},
		// Sliding log claiming 1000 entries in a 9-byte block.
		{"log longer than block", []byte{1, 'k', 6, 0, 2, 2, 0, 0, 0xe8, 0x07}, payloadOff + 8, "log length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readAll(bytes.NewReader(rawSnapshot(t0, tt.payload)))
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("readAll = %v, want a *CorruptError", err)
			}
			if ce.Offset != tt.off || !strings.Contains(ce.What, tt.what) {
				t.Fatalf("error %q at offset %d, want %q at offset %d", ce.What, ce.Offset, tt.what, tt.off)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("offset %d", tt.off)) {
				t.Fatalf("message %q does not name offset %d", err, tt.off)
			}
		})
	}
	// The same builder with a valid record decodes: the cases above fail
	// for their content, not for the framing.
	if _, got, err := readAll(bytes.NewReader(rawSnapshot(t0, []byte{1, 'k', 1, 1, 2, 0, 0, 0}))); err != nil || len(got) != 1 {
		t.Fatalf("valid raw record: %d records, %v", len(got), err)
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	good := encodeSnapshot(t, Header{Created: t0, Shards: 2}, nil)
	set := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	tests := []struct {
		name string
		in   []byte
		is   error
		what string
	}{
		{"not a snapshot", []byte("REDIS0011 and then some more bytes to fill a header"), ErrCorrupt, "bad magic"},
		{"newer version", set(8, 3), ErrVersion, "format version 3"},
		{"version 0", set(8, 0), ErrCorrupt, "version 0"},
		{"flags", set(12, 1), ErrCorrupt, "flags"},
		{"meta too long", set(28, MaxMetaLen+1), ErrCorrupt, "metadata length"},
		{"meta past the end", set(28, 1000), ErrTruncated, "metadata"},
		{"empty input", nil, ErrTruncated, "header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDecoder(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.what) {
				t.Fatalf("NewDecoder = %v, want %v mentioning %q", err, tt.is, tt.what)
			}
		})
	}
}

// failWriter fails once it has accepted n bytes.
type failWriter struct {
	n   int
	err error
}

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) <= w.n {
		w.n -= len(p)
		return len(p), nil
	}
	n := w.n
	w.n = 0
	return n, w.err
}

func TestEncoderWriteErrorIsSticky(t *testing.T) {
	boom := errors.New("disk full")
	w := &failWriter{n: 100_000, err: boom}
	enc, err := NewEncoder(w, Header{Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	es := manyEntries(20_000)
	var encErr error
	for i := range es {
		if encErr = enc.Encode(es[i].Key, &es[i].State); encErr != nil {
			break
		}
	}
	if !errors.Is(encErr, boom) {
		t.Fatalf("Encode = %v, want the writer's error", encErr)
	}
	if err := enc.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the writer's error", err)
	}
}

func TestNewEncoderLimits(t *testing.T) {
	if _, err := NewEncoder(io.Discard, Header{Shards: MaxShards + 1}); err == nil {
		t.Fatal("NewEncoder with too many shards: no error")
	}
	if _, err := NewEncoder(io.Discard, Header{Meta: make([]byte, MaxMetaLen+1)}); err == nil {
		t.Fatal("NewEncoder with oversized metadata: no error")
	}
	enc, _ := NewEncoder(io.Discard, Header{})
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	st := sampleEntries()[0].State
	if err := enc.Encode([]byte("k"), &st); !errors.Is(err, ErrClosed) {
		t.Fatalf("Encode after Close = %v, want ErrClosed", err)
	}
}

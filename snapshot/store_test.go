package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// randomRequest returns a valid request of kind k with parameters small
// enough that keys stay alive across a test, sometimes changing between
// calls (the engine keeps the stored state as it is).
func randomRequest(rng *rand.Rand, k engine.Kind) engine.Request {
	periods := []int64{1e6, 250e6, sec, 10 * sec, 3600 * sec, engine.MaxPeriod}
	r := engine.Request{
		Kind:     k,
		Burst:    1 + rng.Int64N(20),
		Rate:     1 + rng.Int64N(7),
		Period:   periods[rng.IntN(len(periods))],
		Quantity: rng.Int64N(4),
	}
	switch k {
	case engine.KindGCRA:
		r.Burst--                             // max_burst may be 0
		r.Quantity = rng.Int64N(5) - 1        // a refund sometimes
		r.Period = (1 + rng.Int64N(60)) * sec // CL.THROTTLE periods are whole seconds
	case engine.KindTokenBucket:
		r.Interval = rng.IntN(3) == 0
	case engine.KindFixedWindow, engine.KindSlidingWindow, engine.KindSlidingLog:
		r.Rate = 0
	}
	return r
}

// fillStore applies n random limiter requests over keys of every kind at
// instants from start on (steps of up to 50 ms, now and then 1 s back, as a
// stepped clock would) and returns the last instant.
func fillStore(t testing.TB, s *shards.Store, rng *rand.Rand, n, keys int, start int64) int64 {
	t.Helper()
	now := start
	var res shards.Result
	for i := 0; i < n; i++ {
		k := engine.Kind(1 + rng.IntN(6))
		key := fmt.Appendf(nil, "%s:%d", k, rng.IntN(keys))
		op := shards.Op{Code: shards.OpLimit, Keys: [][]byte{key}, Reqs: []engine.Request{randomRequest(rng, k)}}
		s.Exec(&op, now, &res)
		if res.Err != nil {
			t.Errorf("Exec(%s %+v): %v", key, op.Reqs[0], res.Err) // Errorf: also called from writer goroutines
			return now
		}
		now += rng.Int64N(50e6)
		if rng.IntN(500) == 0 {
			now -= sec
		}
	}
	return now
}

// TestEngineStatesAreValid checks that every state the engine stores passes
// ValidateState: otherwise saving a live store would fail.
func TestEngineStatesAreValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := newStore(t, 8)
	now := t0
	for round := 0; round < 20; round++ {
		now = fillStore(t, s, rng, 2000, 50, now)
		for _, e := range dump(t, s, now) {
			if err := ValidateState(&e.State); err != nil {
				t.Fatalf("engine state of %q at %d: %v", e.Key, now, err)
			}
		}
	}
}

func TestWriteStoreLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := newStore(t, 16)
	now := fillStore(t, src, rng, 20_000, 2000, t0)
	want := dump(t, src, now)
	if len(want) < 1000 {
		t.Fatalf("only %d live keys: the test would prove little", len(want))
	}

	var buf bytes.Buffer
	ws, err := WriteStore(&buf, src, now, []byte("meta"))
	if err != nil {
		t.Fatalf("WriteStore: %v", err)
	}
	if ws.Keys != uint64(len(want)) || ws.Bytes != int64(buf.Len()) {
		t.Fatalf("WriteStore stats = %+v, want %d keys and %d bytes", ws, len(want), buf.Len())
	}

	// A store of another shard count, holding a key the load replaces.
	dst := newStore(t, 4)
	dst.Put([]byte("stale"), engine.State{Kind: engine.KindGCRA, ExpireAt: math.MaxInt64, A: math.MaxInt64})
	ls, err := Load(bytes.NewReader(buf.Bytes()), dst, now)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if ls.Keys != len(want) || ls.Expired != 0 || ls.Header.Created != now || ls.Header.Shards != 16 || string(ls.Header.Meta) != "meta" {
		t.Fatalf("Load stats = %+v, want %d keys, 0 expired, created %d, 16 shards", ls, len(want), now)
	}
	sameEntries(t, dump(t, dst, now), want)

	// Loading later drops exactly the keys expired by then.
	later := now + 5*sec
	stillLive := dump(t, src, later)
	dst2 := newStore(t, 4)
	ls, err = Load(bytes.NewReader(buf.Bytes()), dst2, later)
	if err != nil {
		t.Fatalf("Load later: %v", err)
	}
	if ls.Keys != len(stillLive) || ls.Keys+ls.Expired != len(want) {
		t.Fatalf("Load 5 s later: %d keys + %d expired, want %d + %d", ls.Keys, ls.Expired, len(stillLive), len(want)-len(stillLive))
	}
	sameEntries(t, dump(t, dst2, later), stillLive)
}

// TestSnapshotsAreDeterministic: equal stores give byte-identical
// snapshots, whatever order their keys were written in, through WriteStore
// and CaptureStore alike (Raft replicas compare their snapshots).
func TestSnapshotsAreDeterministic(t *testing.T) {
	es := manyEntries(5000)
	a, b := newStore(t, 8), newStore(t, 8)
	for i := range es {
		a.Put(es[i].Key, es[i].State)
		j := len(es) - 1 - i
		b.Put(es[j].Key, es[j].State)
	}
	var wa, wb, wc bytes.Buffer
	if _, err := WriteStore(&wa, a, t0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteStore(&wb, b, t0, nil); err != nil {
		t.Fatal(err)
	}
	c := CaptureStore(b, t0)
	if c.Len() != len(es) {
		t.Fatalf("CaptureStore Len = %d, want %d", c.Len(), len(es))
	}
	if _, err := c.Write(&wc, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wa.Bytes(), wb.Bytes()) {
		t.Fatalf("WriteStore of equal stores differ at offset %d", firstDiff(wa.Bytes(), wb.Bytes()))
	}
	if !bytes.Equal(wa.Bytes(), wc.Bytes()) {
		t.Fatalf("Captured.Write differs from WriteStore at offset %d", firstDiff(wa.Bytes(), wc.Bytes()))
	}
}

// TestWriteStoreUnderTraffic writes snapshots while writers keep changing
// the store (run with -race): each must decode, and hold only valid states.
func TestWriteStoreUnderTraffic(t *testing.T) {
	s := newStore(t, 16)
	now := fillStore(t, s, rand.New(rand.NewPCG(5, 6)), 5000, 1000, t0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				fillStore(t, s, rng, 100, 1000, now)
			}
		}()
	}
	for i := 0; i < 5; i++ {
		var buf bytes.Buffer
		ws, err := WriteStore(&buf, s, now, nil)
		if err != nil {
			t.Fatalf("WriteStore: %v", err)
		}
		_, got, err := readAll(&buf)
		if err != nil || uint64(len(got)) != ws.Keys {
			t.Fatalf("decode a snapshot taken under traffic: %d records (wrote %d), %v", len(got), ws.Keys, err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestLoadRefusesNewerVersion(t *testing.T) {
	b := encodeSnapshot(t, Header{Created: t0}, sampleEntries())
	b[8] = Version + 1
	s := newStore(t, 1)
	if _, err := Load(bytes.NewReader(b), s, t0); !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of version %d = %v, want ErrVersion (not ErrCorrupt)", Version+1, err)
	}
}

// readAll decodes a whole snapshot from r into memory and returns its
// header and records, only if all of it verifies. Keys are copied. Load
// installs into a store without it.
func readAll(r io.Reader) (Header, []shards.Entry, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return Header{}, nil, err
	}
	var out []shards.Entry
	for {
		key, st, err := d.Next()
		if errors.Is(err, io.EOF) {
			return d.Header(), out, nil
		}
		if err != nil {
			return Header{}, nil, err
		}
		out = append(out, shards.Entry{Key: bytes.Clone(key), State: st})
	}
}

package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// engineStates returns states of every limiter kind as the engine leaves
// them after a few requests, plus the hand-made edge cases of
// sampleEntries.
func engineStates(t *testing.T) []engine.State {
	t.Helper()
	reqs := []engine.Request{
		{Kind: engine.KindGCRA, Burst: 5, Rate: 1, Period: int64(time.Second), Quantity: 1},
		{Kind: engine.KindTokenBucket, Burst: 10, Rate: 3, Period: int64(time.Second), Quantity: 2},
		{Kind: engine.KindTokenBucket, Burst: 10, Rate: 10, Period: int64(time.Minute), Quantity: 3, Interval: true},
		{Kind: engine.KindLeakyBucket, Burst: 10, Rate: 2, Period: int64(time.Second), Quantity: 1},
		{Kind: engine.KindFixedWindow, Burst: 100, Period: int64(time.Hour), Quantity: 7},
		{Kind: engine.KindSlidingWindow, Burst: 100, Period: int64(time.Minute), Quantity: 4},
		{Kind: engine.KindSlidingLog, Burst: 100, Period: int64(time.Minute), Quantity: 2},
		{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Burst: 100, Period: int64(time.Minute), Quantity: 2},
	}
	var out []engine.State
	for _, req := range reqs {
		var st engine.State
		now := t0
		for i := 0; i < 4; i++ {
			st, _ = engine.Apply(st, &req, now)
			now += int64(300 * time.Millisecond)
		}
		if err := ValidateState(&st); err != nil {
			t.Fatalf("engine state of %v: %v", req.Kind, err)
		}
		out = append(out, st)
	}
	for _, e := range append(sampleEntries(), leaseEntries()...) {
		out = append(out, e.State)
	}
	return out
}

func TestDumpRoundTrip(t *testing.T) {
	kinds := map[engine.Kind]bool{}
	for _, st := range engineStates(t) {
		kinds[st.Kind] = true
		b := EncodeDump(&st)
		wantV := byte(1) // version 2 only for what version 1 cannot hold
		if st.Kind == engine.KindConcurrency {
			wantV = 2
		}
		if !bytes.HasPrefix(b, []byte(DumpMagic)) || b[len(DumpMagic)] != wantV {
			t.Fatalf("EncodeDump(%+v) = %x: no magic and version", st, b)
		}
		got, err := DecodeDump(b)
		if err != nil || !reflect.DeepEqual(got, st) {
			t.Errorf("DecodeDump(EncodeDump(%+v)) = %+v, %v", st, got, err)
		}
		// The bare encoding round-trips too, leaving what follows it.
		bare := AppendState([]byte("x"), &st)
		got, rest, err := ParseState(append(bare[1:], "tail"...))
		if err != nil || !reflect.DeepEqual(got, st) || string(rest) != "tail" {
			t.Errorf("ParseState(AppendState(%+v)) = %+v, %q, %v", st, got, rest, err)
		}
	}
	for k := engine.KindGCRA; k <= engine.KindSlidingLog; k++ {
		if !kinds[k] {
			t.Errorf("no state of kind %v tested", k)
		}
	}
}

// Every single-byte change and every truncation of a payload is refused,
// each with the sentinel its position calls for.
func TestDumpCorruptionDetected(t *testing.T) {
	for _, st := range engineStates(t) {
		b := EncodeDump(&st)
		for i := range b {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				c := bytes.Clone(b)
				c[i] ^= x
				_, err := DecodeDump(c)
				want := ErrDumpChecksum
				switch {
				case i < len(DumpMagic):
					want = ErrDumpNotCellserver
				case i == len(DumpMagic):
					want = ErrDumpVersion
				}
				if !errors.Is(err, want) {
					t.Fatalf("byte %d ^ %#x of %x: DecodeDump = %v, want %v", i, x, b, err, want)
				}
			}
		}
		for n := 0; n < len(b); n++ {
			_, err := DecodeDump(b[:n])
			want := ErrDumpChecksum
			if n == 0 {
				want = ErrDumpNotCellserver
			}
			if !errors.Is(err, want) {
				t.Fatalf("payload cut to %d of %d bytes: DecodeDump = %v, want %v", n, len(b), err, want)
			}
		}
		if _, err := DecodeDump(append(bytes.Clone(b), 0)); !errors.Is(err, ErrDumpChecksum) {
			t.Errorf("payload with a byte appended: DecodeDump = %v, want ErrDumpChecksum", err)
		}
	}
}

// withCRC frames a body as a payload with a correct checksum.
func withCRC(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}

func TestDecodeDumpErrors(t *testing.T) {
	good := engine.State{Kind: engine.KindGCRA, ExpireAt: t0, A: t0}
	invalid := engine.State{Kind: engine.KindGCRA, ExpireAt: t0, A: t0 + 1} // TAT != expiry
	payload := func(version byte, st *engine.State, extra ...byte) []byte {
		b := append([]byte(DumpMagic), version)
		b = appendState(b, 0, st)
		return withCRC(append(b, extra...))
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		// A Redis DUMP of the string "bar": RDB type 0, the value, RDB
		// version 10, then 8 bytes standing for its CRC-64 (the first
		// byte alone decides).
		{"redis string", []byte("\x00\x03bar\x0a\x00\x86\xa0\x84\x95\x16\x6f\x81\xa3"), ErrDumpNotCellserver},
		{"redis list", []byte{0x12, 0x01, 0x02, 0x0b, 0x00}, ErrDumpNotCellserver},
		{"empty", nil, ErrDumpNotCellserver},
		{"text", []byte("hello world"), ErrDumpNotCellserver},
		{"magic only", []byte(DumpMagic), ErrDumpChecksum},
		{"future version", payload(3, &good), ErrDumpVersion},
		{"version 0", payload(0, &good), ErrDumpVersion},
		{"invalid state", payload(DumpVersion, &invalid), ErrDumpChecksum},
		{"trailing byte inside the checksum", payload(DumpVersion, &good, 0), ErrDumpChecksum},
		{"no state", withCRC(append([]byte(DumpMagic), DumpVersion)), ErrDumpChecksum},
	} {
		if _, err := DecodeDump(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeDump(%x) = %v, want %v", tc.name, tc.in, err, tc.want)
		}
	}
	if st, err := DecodeDump(payload(DumpVersion, &good)); err != nil || !reflect.DeepEqual(st, good) {
		t.Errorf("control payload: DecodeDump = %+v, %v", st, err)
	}
}

func TestParseStateRefuses(t *testing.T) {
	invalid := engine.State{Kind: engine.KindFixedWindow, ExpireAt: t0, A: t0, B: 1} // empty window span
	good := engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + sec, A: 1, Log: []engine.LogEntry{{At: t0, Count: 1}}}
	enc := AppendState(nil, &good)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"invalid state", appendState(nil, 0, &invalid)},
		{"unknown kind", []byte{9, 0, 0, 0, 0, 0}},
		{"unknown mode bits", []byte{1, 0x10, 0, 0, 0, 0}},
	} {
		if _, _, err := ParseState(tc.in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseState(%s) = %v, want ErrCorrupt", tc.name, err)
		}
	}
	for n := range len(enc) {
		if _, _, err := ParseState(enc[:n]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseState(cut to %d of %d) = %v, want ErrCorrupt", n, len(enc), err)
		}
	}
}

// FuzzDecodeDump: whatever DecodeDump accepts is a valid state that
// encodes back to the same payload; everything else fails with one of the
// three sentinels.
func FuzzDecodeDump(f *testing.F) {
	for _, e := range sampleEntries() {
		f.Add(EncodeDump(&e.State))
	}
	f.Add([]byte("\x00\x03bar\x0a\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, err := DecodeDump(in)
		if err != nil {
			if !errors.Is(err, ErrDumpNotCellserver) && !errors.Is(err, ErrDumpVersion) && !errors.Is(err, ErrDumpChecksum) {
				t.Fatalf("DecodeDump error %v matches no sentinel", err)
			}
			return
		}
		if err := ValidateState(&st); err != nil {
			t.Fatalf("accepted %+v: %v", st, err)
		}
		if out := EncodeDump(&st); !bytes.Equal(out, in) {
			// Equal states may have more than one encoding (a mode bit
			// chosen against the encoder's rule); they must decode alike.
			if again, err := DecodeDump(out); err != nil || !reflect.DeepEqual(again, st) {
				t.Fatalf("re-encoded %x decodes to %+v, %v; want %+v", out, again, err, st)
			}
		}
	})
}

package snapshot

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cellserver/cellserver/shards"
)

// FuzzDecode feeds arbitrary bytes to the decoder. It must never panic nor
// allocate beyond what the input holds, must fail with an error matching
// ErrCorrupt or ErrVersion on bad input, and whatever it accepts must be
// valid states that re-encode and decode to the same records. Seeds live in
// testdata/fuzz/FuzzDecode (written by go test -run TestGolden -update).
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, in []byte) {
		hdr, got, err := readAll(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v matches neither ErrCorrupt nor ErrVersion", err)
			}
			// Load agrees, and leaves the store untouched.
			s, _ := shards.New(shards.Config{Shards: 1})
			if _, lerr := Load(bytes.NewReader(in), s, hdr.Created); lerr == nil || s.Len(0) != 0 {
				t.Fatalf("readAll failed (%v) but Load = %v with %d keys", err, lerr, s.Len(0))
			}
			return
		}
		for i := range got {
			if err := ValidateState(&got[i].State); err != nil {
				t.Fatalf("accepted record %d: %v", i, err)
			}
		}
		var buf bytes.Buffer
		enc, err := NewEncoder(&buf, hdr)
		if err != nil {
			t.Fatalf("re-encode header %+v: %v", hdr, err)
		}
		for i := range got {
			if err := enc.Encode(got[i].Key, &got[i].State); err != nil {
				t.Fatalf("re-encode record %d: %v", i, err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		hdr2, got2, err := readAll(&buf)
		if err != nil {
			t.Fatalf("decode re-encoded snapshot: %v", err)
		}
		if hdr2.Created != hdr.Created || hdr2.Shards != hdr.Shards || !bytes.Equal(hdr2.Meta, hdr.Meta) {
			t.Fatalf("re-encoded header %+v, want %+v", hdr2, hdr)
		}
		sameEntries(t, got2, got)
	})
}

// FuzzRecords fuzzes the record decoder behind valid framing: the input is
// wrapped as one block of count records with correct checksums, which
// random bytes fed to FuzzDecode almost never reach. The properties are
// FuzzDecode's.
func FuzzRecords(f *testing.F) {
	es := sampleEntries()
	for i := range es {
		f.Add(appendRecord(nil, t0, es[i].Key, &es[i].State), uint8(1))
	}
	var all []byte
	for i := range es {
		all = appendRecord(all, t0, es[i].Key, &es[i].State)
	}
	f.Add(all, uint8(len(es)))
	f.Fuzz(func(t *testing.T, payload []byte, count uint8) {
		if len(payload) == 0 || count == 0 {
			return
		}
		in := rawSnapshotN(t0, uint32(count), payload)
		hdr, got, err := readAll(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if len(got) != int(count) {
			t.Fatalf("decoded %d records, block claims %d", len(got), count)
		}
		var buf bytes.Buffer
		enc, err := NewEncoder(&buf, hdr)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if err := enc.Encode(got[i].Key, &got[i].State); err != nil {
				t.Fatalf("re-encode accepted record %d (%+v): %v", i, got[i].State, err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		_, got2, err := readAll(&buf)
		if err != nil {
			t.Fatalf("decode re-encoded snapshot: %v", err)
		}
		sameEntries(t, got2, got)
	})
}

package codec

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// everyField returns requests that, between them, set every field of
// engine.Request to each of several values other than its zero, found by
// reflection: a field added to the request later is set here too, so a
// codec that does not carry it fails the round trip. A field of a type
// this test cannot fill fails the test, asking for it to be taught.
func everyField(t *testing.T) []engine.Request {
	t.Helper()
	ints := []int64{1, -1, 7, 1 << 40, -(1 << 40), 1<<62 + 3}
	var out []engine.Request
	typ := reflect.TypeFor[engine.Request]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var vals []reflect.Value
		switch {
		case f.Type == reflect.TypeFor[engine.Kind]():
			for k := engine.KindGCRA; k.Valid(); k++ {
				vals = append(vals, reflect.ValueOf(k))
			}
		case f.Type.Kind() == reflect.Bool:
			vals = append(vals, reflect.ValueOf(true))
		case f.Type.Kind() == reflect.Uint8:
			for _, v := range []uint64{1, 2, 3, 255} {
				vals = append(vals, reflect.ValueOf(v).Convert(f.Type))
			}
		case f.Type.Kind() == reflect.String:
			for _, v := range []string{"a", "job-7", string(make([]byte, 64)), "\xff\r\n $"} {
				vals = append(vals, reflect.ValueOf(v))
			}
		case f.Type.Kind() == reflect.Int64:
			for _, v := range ints {
				vals = append(vals, reflect.ValueOf(v).Convert(f.Type))
			}
		default:
			t.Fatalf("engine.Request.%s is a %v: teach this test (and the codec) to carry it", f.Name, f.Type)
		}
		for _, v := range vals {
			// The field alone set (on a GCRA request: the RESP form
			// names a kind).
			one := engine.Request{Kind: engine.KindGCRA}
			reflect.ValueOf(&one).Elem().Field(i).Set(v)
			out = append(out, one)
		}
	}
	// Every field set at once, with values distinct from each other.
	var all engine.Request
	rv := reflect.ValueOf(&all).Elem()
	for i := range typ.NumField() {
		fv := rv.Field(i)
		switch {
		case fv.Type() == reflect.TypeFor[engine.Kind]():
			fv.Set(reflect.ValueOf(engine.KindTokenBucket))
		case fv.Kind() == reflect.Bool:
			fv.SetBool(true)
		case fv.Kind() == reflect.Int64:
			fv.SetInt(int64(1000 + i))
		case fv.Kind() == reflect.Uint8:
			fv.SetUint(uint64(i))
		case fv.Kind() == reflect.String:
			fv.SetString("lease-all")
		}
	}
	return append(out, all)
}

// TestRoundTrip: every field of engine.Request survives both forms.
func TestRoundTrip(t *testing.T) {
	for _, r := range everyField(t) {
		b := AppendBinary([]byte{0xEE}, &r)
		got, n, err := ReadBinary(append(b[1:], 0xFF))
		if err != nil || n != len(b)-1 || got != r {
			t.Errorf("ReadBinary(AppendBinary(%+v)) = %+v, %d, %v; want the request, %d bytes", r, got, n, err, len(b)-1)
		}
		args := AppendArgs([][]byte{[]byte("key")}, &r)
		if len(args) != 1+NumArgs(&r) {
			t.Fatalf("AppendArgs gave %d fields, want %d", len(args)-1, NumArgs(&r))
		}
		got, err = ParseArgs(args[1:])
		if err != nil || got != r {
			t.Errorf("ParseArgs(AppendArgs(%+v)) = %+v, %v", r, got, err)
		}
	}
}

// TestRESPInterval: a request whose only flag is Interval keeps the field's
// older form, 0 or 1, which receivers that predate the other flags read.
func TestRESPInterval(t *testing.T) {
	for _, tc := range []struct {
		r    engine.Request
		want string
	}{
		{engine.Request{Kind: engine.KindTokenBucket}, "0"},
		{engine.Request{Kind: engine.KindTokenBucket, Interval: true}, "1"},
		{engine.Request{Kind: engine.KindGCRA, Shadow: true}, "2"},
		{engine.Request{Kind: engine.KindFixedWindow, Exact: true}, "4"},
	} {
		args := AppendArgs(nil, &tc.r)
		if got := string(args[ArgFields-1]); got != tc.want {
			t.Errorf("flags of %+v = %q, want %q", tc.r, got, tc.want)
		}
	}
}

// TestMalformed: what decodes refuses, naming the field.
func TestMalformed(t *testing.T) {
	good := AppendBinary(nil, &engine.Request{Kind: engine.KindGCRA, Burst: 300, Rate: 1, Period: 1e9, Quantity: 1})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"kind only", good[:1]},
		{"unknown flag", append([]byte{good[0], 0x40}, good[2:]...)},
		{"wait flag without a wait", append([]byte{good[0], 0x10}, good[2:]...)},
		{"lease flag, no op", append([]byte{good[0], FlagLease}, good[2:]...)},
		{"lease longer than its bytes", append(append([]byte{good[0], FlagLease}, good[2:]...), 1, 5, 'a')},
		{"lease above MaxLease", append(append([]byte{good[0], FlagLease}, good[2:]...), 1, 0x81, 0x10)},
		{"truncated", good[:len(good)-1]},
		{"overlong varint", append(good[:2:2], 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)},
	} {
		if _, _, err := ReadBinary(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: ReadBinary(%x) err = %v, want ErrMalformed", tc.name, tc.b, err)
		}
	}
	args := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	for _, f := range [][][]byte{
		args("gcra", "1", "2", "3", "4"),
		args("gcra", "1", "2", "3", "4", "0", "0"),
		args("nosuch", "1", "2", "3", "4", "0"),
		args("gcra", "x", "2", "3", "4", "0"),
		args("gcra", "1", "2", "3", "99999999999999999999", "0"),
		args("gcra", "1", "2", "3", "4", "16"),
		args("concurrency", "1", "0", "3", "1", "8"),
		args("concurrency", "1", "0", "3", "1", "0", "1", "a"),
		args("concurrency", "1", "0", "3", "1", "8", "x", "a"),
		args("gcra", "1", "2", "3", "4", "-1"),
		args("gcra", "1", "2", "3", "4", "256"),
		args("gcra", "1", "2", "3", "4", "16"),
		args("gcra", "1", "2", "3", "4", "64"),
		args("gcra", "1", "2", "3", "4", "0,5"),
		args("gcra", "1", "2", "3", "4", "16,0"),
		args("gcra", "1", "2", "3", "4", "16,x"),
	} {
		if _, err := ParseArgs(f); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseArgs(%q) err = %v, want ErrMalformed", f, err)
		}
	}
}

// TestReadBinaryAllocatesNothing: decoding a request allocates nothing, as
// its doc says; every replica decodes one per decision it applies.
func TestReadBinaryAllocatesNothing(t *testing.T) {
	r := engine.Request{Kind: engine.KindGCRA, Burst: 15, Rate: 30, Period: 60e9, Quantity: 1, Shadow: true}
	b := AppendBinary(nil, &r)
	var sink engine.Request
	allocs := testing.AllocsPerRun(100, func() {
		q, _, err := ReadBinary(b)
		if err != nil {
			t.Fatal(err)
		}
		sink = q
	})
	if sink != r {
		t.Fatalf("ReadBinary = %+v, want %+v", sink, r)
	}
	if allocs != 0 {
		t.Errorf("ReadBinary allocated %v times per call, want 0", allocs)
	}
}

package limitpolicy

import (
	"errors"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

func TestParseOverrides(t *testing.T) {
	tests := []struct {
		in      string
		want    []Override
		wantErr error
	}{
		{"", nil, nil},
		{"vip:* 100 1000 60", []Override{{"vip:*", 100, 1000, int64(time.Minute)}}, nil},
		{"vip:* 100 1000 60 'a b' 0 1 500ms", []Override{{"vip:*", 100, 1000, int64(time.Minute)}, {"a b", 0, 1, int64(500 * time.Millisecond)}}, nil},
		{"vip:* 100 1000", nil, ErrRuleArity},
		{"vip:* -1 1 60", nil, nil},
		{"vip:* 1 0 60", nil, nil},
		{"vip:* 1 1 0", nil, nil},
		{"vip:* 1 1 1us", nil, engine.ErrInvalidDuration},
		{"vip:* x 1 60", nil, engine.ErrNotInteger},
	}
	for _, tc := range tests {
		got, err := ParseOverrides(tc.in)
		bad := len(tc.want) == 0 && tc.in != ""
		switch {
		case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
			t.Errorf("ParseOverrides(%q) = %v, want %v", tc.in, err, tc.wantErr)
		case bad && err == nil:
			t.Errorf("ParseOverrides(%q) = %v, want an error", tc.in, got)
		case !bad && err != nil:
			t.Errorf("ParseOverrides(%q) = %v", tc.in, err)
		case !bad && FormatOverrides(got) != FormatOverrides(tc.want):
			t.Errorf("ParseOverrides(%q) = %q, want %q", tc.in, FormatOverrides(got), FormatOverrides(tc.want))
		}
		if err == nil {
			// Round trip: the formatted value parses to the same rules.
			again, err := ParseOverrides(FormatOverrides(got))
			if err != nil || FormatOverrides(again) != FormatOverrides(got) {
				t.Errorf("round trip of %q: %q, %v", tc.in, FormatOverrides(again), err)
			}
		}
	}
}

func TestApply(t *testing.T) {
	var p Policy
	o, err := ParseOverrides("vip:* 100 1000 60 vip:x 1 1 1 win:* 0 5 10")
	if err != nil {
		t.Fatal(err)
	}
	p.SetOverrides(o)
	s, _ := ParseShadow("try:* vip:y")
	p.SetShadow(s)
	gcra := engine.Request{Kind: engine.KindGCRA, Burst: 5, Rate: 10, Period: int64(time.Second), Quantity: 2}
	fw := engine.Request{Kind: engine.KindFixedWindow, Burst: 5, Period: int64(time.Second), Quantity: 1}
	tests := []struct {
		key     string
		req     engine.Request
		want    engine.Request
		wantErr error
	}{
		{"other", gcra, gcra, nil},
		{"vip:a", gcra, engine.Request{Kind: engine.KindGCRA, Burst: 100, Rate: 1000, Period: int64(time.Minute), Quantity: 2}, nil},
		// First match wins: vip:x matches vip:* first.
		{"vip:x", gcra, engine.Request{Kind: engine.KindGCRA, Burst: 100, Rate: 1000, Period: int64(time.Minute), Quantity: 2}, nil},
		{"vip:y", gcra, engine.Request{Kind: engine.KindGCRA, Burst: 100, Rate: 1000, Period: int64(time.Minute), Quantity: 2, Shadow: true}, nil},
		{"try:1", gcra, func() engine.Request { r := gcra; r.Shadow = true; return r }(), nil},
		// A window limiter takes limit and window; rate is ignored.
		{"vip:w", fw, engine.Request{Kind: engine.KindFixedWindow, Burst: 100, Period: int64(time.Minute), Quantity: 1}, nil},
		// A limit of 0 is valid for GCRA only.
		{"win:1", fw, fw, engine.ErrZero},
		{"win:1", gcra, engine.Request{Kind: engine.KindGCRA, Burst: 0, Rate: 5, Period: int64(10 * time.Second), Quantity: 2}, nil},
	}
	for _, tc := range tests {
		req := tc.req
		err := p.Apply([]byte(tc.key), &req, engine.DefaultParseOptions())
		if !errors.Is(err, tc.wantErr) || req != tc.want {
			t.Errorf("Apply(%q, %+v) = %+v, %v; want %+v, %v", tc.key, tc.req, req, err, tc.want, tc.wantErr)
		}
	}
	st := p.Stats()
	if st.Overrides != 3 || st.Shadows != 2 || st.Overridden != 5 || st.ShadowRequests != 2 {
		t.Errorf("Stats = %+v, want 3 overrides, 2 shadows, 5 overridden, 2 shadow requests", st)
	}
	if m := p.Lookup([]byte("vip:y")); m.Override == nil || m.Override.Pattern != "vip:*" || m.Shadow != "vip:y" {
		t.Errorf("Lookup(vip:y) = %+v", m)
	}
}

// TestApplyNoRulesAllocs: with no rules, Apply costs no allocation.
func TestApplyNoRulesAllocs(t *testing.T) {
	var p Policy
	req := engine.Request{Kind: engine.KindGCRA, Burst: 1, Rate: 1, Period: 1e9, Quantity: 1}
	key := []byte("k")
	if n := testing.AllocsPerRun(100, func() { _ = p.Apply(key, &req, engine.ParseOptions{}) }); n != 0 {
		t.Errorf("Apply allocates %v times per call, want 0", n)
	}
	p.SetShadow([]string{"x*"})
	if n := testing.AllocsPerRun(100, func() { _ = p.Apply(key, &req, engine.ParseOptions{}) }); n != 0 {
		t.Errorf("Apply with rules allocates %v times per call, want 0", n)
	}
}

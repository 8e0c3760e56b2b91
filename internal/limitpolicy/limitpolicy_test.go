package limitpolicy

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/glob"
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

// TestParseCaps: a list of more than MaxRules rules, or a pattern longer
// than glob.MaxPatternLen, is refused with the count or the rule and the
// cap; a list at the cap is taken.
func TestParseCaps(t *testing.T) {
	overrides := func(n int, pattern string) string {
		return strings.Repeat(pattern+" 1 1 1 ", n)
	}
	shadow := func(n int, pattern string) string {
		return strings.Repeat(pattern+" ", n)
	}
	long := strings.Repeat("a", glob.MaxPatternLen+1)
	tests := []struct {
		name    string
		parse   func(string) error
		in      string
		wantErr error
		text    string
	}{
		{"overrides at the cap", func(v string) error { _, err := ParseOverrides(v); return err }, overrides(MaxRules, "x:*"), nil, ""},
		{"overrides over the cap", func(v string) error { _, err := ParseOverrides(v); return err }, overrides(MaxRules+1, "x:*"), ErrTooManyRules, "too many rules: 1025, at most 1024"},
		{"override pattern too long", func(v string) error { _, err := ParseOverrides(v); return err }, overrides(1, "x:*") + overrides(1, long), ErrPatternTooLong, "rule 2: pattern too long: 513 bytes, at most 512"},
		{"shadow at the cap", func(v string) error { _, err := ParseShadow(v); return err }, shadow(MaxRules, "x:*"), nil, ""},
		{"shadow over the cap", func(v string) error { _, err := ParseShadow(v); return err }, shadow(5000, "x:*"), ErrTooManyRules, "too many rules: 5000, at most 1024"},
		{"shadow pattern too long", func(v string) error { _, err := ParseShadow(v); return err }, long, ErrPatternTooLong, "rule 1: pattern too long: 513 bytes, at most 512"},
	}
	for _, tt := range tests {
		err := tt.parse(tt.in)
		if !errors.Is(err, tt.wantErr) || (err != nil && err.Error() != tt.text) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.text)
		}
	}
}

// TestLookupFirstMatch: on random keys, the compiled lists answer what a
// scan of the rules in order answers (the first match wins).
func TestLookupFirstMatch(t *testing.T) {
	patterns := []string{"vip:*", "*:vip", "user:?", "user:[0-4]*", "*a*a*a*b", "user:*", "*"}
	var o []Override
	for i, p := range patterns[:len(patterns)-1] {
		o = append(o, Override{Pattern: p, Burst: int64(i), Rate: 1, Period: int64(time.Second)})
	}
	var p Policy
	p.SetOverrides(o)
	p.SetShadow(patterns[2:])
	r := rand.New(rand.NewSource(9))
	for k := 0; k < 5000; k++ {
		key := []byte(randomKey(r))
		m := p.Lookup(key)
		wantO, wantS := -1, -1
		for i := range o {
			if glob.Match([]byte(o[i].Pattern), key) {
				wantO = i
				break
			}
		}
		for i, s := range patterns[2:] {
			if glob.Match([]byte(s), key) {
				wantS = i
				break
			}
		}
		gotO := -1
		if m.Override != nil {
			gotO = int(m.Override.Burst)
		}
		if gotO != wantO || m.ShadowOK != (wantS >= 0) || (wantS >= 0 && m.Shadow != patterns[2+wantS]) {
			t.Fatalf("Lookup(%q) = %+v, want override %d, shadow %d", key, m, wantO, wantS)
		}
	}
}

func randomKey(r *rand.Rand) string {
	prefixes := []string{"vip:", "user:", "", "a", "x:"}
	const alphabet = "abv:ip0123456789"
	b := []byte(prefixes[r.Intn(len(prefixes))])
	for n := r.Intn(10); n > 0; n-- {
		b = append(b, alphabet[r.Intn(len(alphabet))])
	}
	return string(b)
}

package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/glob"
)

// pair is a test rule: PATTERN N (an integer).
type pair struct {
	pattern string
	n       int
}

var errOdd = errors.New("pattern without a number")

var pairSyntax = Syntax[pair]{
	Pattern: func(p pair) string { return p.pattern },
	Read: func(w []string, n int) (pair, int, error) {
		if len(w) < 2 {
			return pair{}, 0, errOdd
		}
		v, err := strconv.Atoi(w[1])
		if err != nil {
			return pair{}, 0, fmt.Errorf("rule %d: %w", n, err)
		}
		return pair{w[0], v}, 2, nil
	},
	Append: func(b []byte, p pair) []byte {
		return strconv.AppendInt(append(append(b, QuotePattern(p.pattern)...), ' '), int64(p.n), 10)
	},
	Check: func(ps []pair) error {
		for _, p := range ps {
			if p.n < 0 {
				return errors.New("negative")
			}
		}
		return nil
	},
	Wrap: func(err error) error { return fmt.Errorf("pairs: %w", err) },
}

// TestParseFormat: the one parse loop reads rule after rule, checks the
// caps and the whole list, and words its own errors through Wrap; Format
// writes what Parse reads back.
func TestParseFormat(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "", want: ""},
		{in: "   ", want: ""},
		{in: "a:* 1  'b c' 2", want: `a:* 1 "b c" 2`},
		{in: `"" 3 #x 4`, want: `"" 3 "#x" 4`},
		{in: "a:* 1 b", wantErr: errOdd.Error()},
		{in: "a:* 1 b x", wantErr: "rule 2: "},
		{in: "a:* -1", wantErr: "negative"},
		{in: `a:* "1`, wantErr: "pairs: "},
		{in: strings.Repeat("a 1 ", glob.MaxRules+1), wantErr: "pairs: too many rules: 1025, at most 1024"},
		{in: "a 1 " + strings.Repeat("b", glob.MaxPatternLen+1) + " 2", wantErr: "pairs: rule 2: pattern too long: 513 bytes, at most 512"},
	}
	for _, tt := range tests {
		got, err := pairSyntax.Parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%.40q) = %v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || pairSyntax.Format(got) != tt.want {
			t.Errorf("Format(Parse(%q)) = %q, %v; want %q", tt.in, pairSyntax.Format(got), err, tt.want)
		}
		again, err := pairSyntax.Parse(pairSyntax.Format(got))
		if err != nil || pairSyntax.Format(again) != tt.want {
			t.Errorf("round trip of %q: %q, %v", tt.in, pairSyntax.Format(again), err)
		}
	}
}

// TestTableFirstMatch: Lookup and Index give the first rule whose pattern
// matches, as a scan in order does; a nil table and a zero Live have no
// rules.
func TestTableFirstMatch(t *testing.T) {
	rs, err := pairSyntax.Parse("user:vip* 0 user:* 1 *:x 2 ? 3")
	if err != nil {
		t.Fatal(err)
	}
	tab := pairSyntax.Compile(rs)
	for _, key := range []string{"user:vip1", "user:1", "a:x", "q", "", "user:vip", "zz"} {
		want := -1
		for i, r := range rs {
			if glob.Match([]byte(r.pattern), []byte(key)) {
				want = i
				break
			}
		}
		got := tab.Index([]byte(key))
		r := tab.Lookup([]byte(key))
		if got != want || (r == nil) != (want < 0) || (r != nil && r.n != want) {
			t.Errorf("Index(%q) = %d, Lookup = %v; want %d", key, got, r, want)
		}
	}
	var live Live[pair]
	if live.Load().Lookup([]byte("user:1")) != nil || live.Load().Len() != 0 || live.Load().Rules() != nil {
		t.Error("a zero Live has rules")
	}
	live.Store(tab)
	if r := live.Load().Lookup([]byte("user:1")); r == nil || r.n != 1 || live.Load().Len() != 4 {
		t.Errorf("after Store: Lookup(user:1) = %v, Len %d", r, live.Load().Len())
	}
}

// TestLookupAllocs: a lookup on a cached path allocates nothing.
func TestLookupAllocs(t *testing.T) {
	rs, _ := pairSyntax.Parse("a:* 1 b:* 2")
	tab := pairSyntax.Compile(rs)
	key := []byte("b:key")
	tab.Lookup(key)
	if n := testing.AllocsPerRun(100, func() { tab.Lookup(key) }); n != 0 {
		t.Errorf("Lookup allocates %v times, want 0", n)
	}
}

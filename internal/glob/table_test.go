package glob

import (
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// firstMatch is the naive scan a Table replaces: the first pattern that
// Match accepts, or -1.
func firstMatch(patterns [][]byte, key []byte) int {
	for i, p := range patterns {
		if Match(p, key) {
			return i
		}
	}
	return -1
}

func bytesOf(patterns []string) [][]byte {
	out := make([][]byte, len(patterns))
	for i, p := range patterns {
		out[i] = []byte(p)
	}
	return out
}

func TestTableMatch(t *testing.T) {
	tests := []struct {
		patterns []string
		key      string
		want     int
	}{
		{nil, "x", -1},
		{[]string{"a*"}, "", -1},
		{[]string{""}, "", 0},
		{[]string{"", "*"}, "", 0},
		{[]string{"*"}, "", 0},
		{[]string{"vip:*", "vip:x", "*"}, "vip:x", 0},
		{[]string{"vip:x", "vip:*", "*"}, "vip:x", 0},
		{[]string{"vip:x", "vip:*", "*"}, "vip:y", 1},
		{[]string{"vip:x", "vip:*", "*"}, "other", 2},
		{[]string{"*:api:*", "user:*"}, "user:api:1", 0},
		{[]string{"user:*", "*:api:*"}, "x:api:1", 1},
		{[]string{"a?c"}, "abc", 0},
		{[]string{"a?c"}, "ac", -1},
		{[]string{"[a-c]x"}, "bx", 0},
		{[]string{"[c-a]x"}, "bx", 0}, // a reversed range, as Match reads it
		{[]string{"[^a-c]x"}, "bx", -1},
		{[]string{"[^a-c]x"}, "dx", 0},
		{[]string{"[abc"}, "b", 0}, // an unterminated class runs to the end
		{[]string{"[]x"}, "x", -1},
		{[]string{`\*`}, "*", 0},
		{[]string{`\*`}, "a", -1},
		{[]string{`a\`}, `a\`, 0}, // a final '\' is itself
		{[]string{`[\]]`}, "]", 0},
		{[]string{"*a*a*a*a*a*a*a*a*b"}, strings.Repeat("a", 10000), -1},
		{[]string{"*a*a*a*a*a*a*a*a*b"}, strings.Repeat("a", 10000) + "b", 0},
		{[]string{"x*", "*b"}, strings.Repeat("a", 100) + "b", 1},
	}
	for _, tt := range tests {
		tab := Compile(tt.patterns)
		if got := tab.Match([]byte(tt.key)); got != tt.want {
			t.Errorf("Compile(%q).Match(%.20q) = %d, want %d", tt.patterns, tt.key, got, tt.want)
		}
		if naive := firstMatch(bytesOf(tt.patterns), []byte(tt.key)); naive != tt.want {
			t.Errorf("the naive scan of %q on %.20q = %d, want %d (test is wrong)", tt.patterns, tt.key, naive, tt.want)
		}
	}
}

// randomPattern draws a glob over a small alphabet, with every token kind
// Match reads (and the odd ones: an unterminated class, a final '\').
func randomPattern(r *rand.Rand) string {
	tokens := []string{"a", "b", "c", ":", "*", "**", "?", "[ab]", "[^a]", "[a-b]", "[b-a]", `\*`, `\a`, "[a", `\`, "[]", "[^]", `[\]]`, "[a-]"}
	n := r.Intn(7)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(tokens[r.Intn(len(tokens))])
	}
	return b.String()
}

func randomKey(r *rand.Rand) string {
	const alphabet = "abc:*]\\-^["
	n := r.Intn(12)
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return string(b)
}

// TestTableProperty: on random tables and keys, a Table answers what the
// naive first-match scan answers.
func TestTableProperty(t *testing.T) {
	r := rand.New(rand.NewSource(27))
	for round := 0; round < 400; round++ {
		patterns := make([]string, 1+r.Intn(12))
		for i := range patterns {
			patterns[i] = randomPattern(r)
		}
		tab := Compile(patterns)
		pb := bytesOf(patterns)
		for k := 0; k < 300; k++ {
			key := []byte(randomKey(r))
			if got, want := tab.Match(key), firstMatch(pb, key); got != want {
				t.Fatalf("Compile(%q).Match(%q) = %d, want %d", patterns, key, got, want)
			}
		}
	}
}

// TestTableCacheReset: a table whose DFA outgrows its cache drops it and
// still answers right.
func TestTableCacheReset(t *testing.T) {
	// '*a' then 10 '?': a DFA of 2^10 states (the last 11 bytes' 'a's).
	patterns := []string{"*a??????????", "*b?????????c"}
	tab := Compile(patterns)
	pb := bytesOf(patterns)
	r := rand.New(rand.NewSource(1))
	for k := 0; k < 3000; k++ {
		key := make([]byte, 200)
		for i := range key {
			key[i] = "abc"[r.Intn(3)]
		}
		if got, want := tab.Match(key), firstMatch(pb, key); got != want {
			t.Fatalf("Match(%q) = %d, want %d", key, got, want)
		}
	}
	if tab.Resets() == 0 {
		t.Errorf("Resets() = 0: the cache never filled (the test does not test the reset)")
	}
}

// TestTableConcurrent: many goroutines filling in one table's DFA at once,
// growing its transitions and dropping its cache, get the naive scan's
// answers (run with -race).
func TestTableConcurrent(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		key      func(r *rand.Rand) []byte
	}{
		{"rules", []string{"user:vip-*", "*a*b*c", "login:*", "*:api:*", "x?y*"}, func(r *rand.Rand) []byte {
			return []byte(randomKey(r) + "login:" + randomKey(r))
		}},
		{"cache dropped", []string{"*a??????????", "*b?????????c"}, func(r *rand.Rand) []byte {
			key := make([]byte, 60)
			for i := range key {
				key[i] = "abc"[r.Intn(3)]
			}
			return key
		}},
	}
	for _, tt := range tests {
		tab := Compile(tt.patterns)
		pb := bytesOf(tt.patterns)
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(seed int64) {
				defer wg.Done()
				r := rand.New(rand.NewSource(seed))
				for k := 0; k < 1000; k++ {
					key := tt.key(r)
					if got, want := tab.Match(key), firstMatch(pb, key); got != want {
						errs <- string(key)
						return
					}
				}
			}(int64(w))
		}
		wg.Wait()
		close(errs)
		for k := range errs {
			t.Errorf("%s: Match(%q) differs from the naive scan", tt.name, k)
		}
		if tt.name == "cache dropped" && tab.Resets() == 0 {
			t.Errorf("%s: Resets() = 0, want the cache dropped at least once", tt.name)
		}
	}
}

func TestCheckRules(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		want     error
		text     string
	}{
		{"none", nil, nil, ""},
		{"at the rule cap", make([]string, MaxRules), nil, ""},
		{"over the rule cap", make([]string, 5000), ErrTooManyRules, "too many rules: 5000, at most 1024"},
		{"at the length cap", []string{strings.Repeat("*", MaxPatternLen)}, nil, ""},
		{"over the length cap", []string{"a", strings.Repeat("a", MaxPatternLen+1)}, ErrPatternTooLong, "rule 2: pattern too long: 513 bytes, at most 512"},
	}
	for _, tt := range tests {
		err := CheckRules(tt.patterns)
		if !errors.Is(err, tt.want) || (err != nil && err.Error() != tt.text) {
			t.Errorf("%s: CheckRules = %v, want %v (%q)", tt.name, err, tt.want, tt.text)
		}
	}
}

// TestTableMatchAllocs: a cached path costs no allocation.
func TestTableMatchAllocs(t *testing.T) {
	tab := Compile([]string{"vip:*", "*a*a*b", "login:*"})
	key := []byte("user:" + strings.Repeat("a", 1000))
	tab.Match(key)
	if n := testing.AllocsPerRun(100, func() { tab.Match(key) }); n != 0 {
		t.Errorf("Match allocates %v times per call, want 0", n)
	}
}

// BenchmarkTableMatch answers: what does one key cost a compiled table,
// by the number of patterns and the key's length? The patterns are the
// pathological *a*a*a*a*a*a*a*a*b<i> (none matches a key of 'a's); the
// baseline is the naive scan with Match.
func BenchmarkTableMatch(b *testing.B) {
	for _, n := range []int{1, 128, 1024} {
		for _, keyLen := range []int{16, 10 << 10} {
			patterns := make([]string, n)
			for i := range patterns {
				patterns[i] = "*a*a*a*a*a*a*a*a*b" + strconv.Itoa(i)
			}
			key := []byte(strings.Repeat("a", keyLen))
			name := "rules=" + strconv.Itoa(n) + "/key=" + strconv.Itoa(keyLen)
			b.Run("table/"+name, func(b *testing.B) {
				tab := Compile(patterns)
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					tab.Match(key)
				}
			})
			b.Run("scan/"+name, func(b *testing.B) {
				pb := bytesOf(patterns)
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					firstMatch(pb, key)
				}
			})
		}
	}
}

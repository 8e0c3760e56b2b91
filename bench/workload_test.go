package main

import (
	"bufio"
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"SET {key} v", []string{"SET", "{key}", "v"}, true},
		{"  CL.THROTTLE\t{key}  15 30 60 ", []string{"CL.THROTTLE", "{key}", "15", "30", "60"}, true},
		{`SET {key} "hello world"`, []string{"SET", "{key}", "hello world"}, true},
		{`SET {key} 'a "b"'`, []string{"SET", "{key}", `a "b"`}, true},
		{`SET {key} "a\"b\\c"`, []string{"SET", "{key}", `a"b\c`}, true},
		{`SET {key} ""`, []string{"SET", "{key}", ""}, true},
		{`SET {key} "open`, nil, false},
		{"", nil, true},
	}
	for _, tt := range tests {
		got, err := splitArgs(tt.in)
		if (err == nil) != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// decodeCommand parses one RESP array of bulk strings, as a server would.
func decodeCommand(t *testing.T, b []byte) []string {
	t.Helper()
	rr := &replyReader{r: bufio.NewReader(bytes.NewReader(b))}
	v, err := rr.value()
	if err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("decode %q: %T, want an array", b, v)
	}
	out := make([]string, len(arr))
	for i, a := range arr {
		out[i] = a.(string)
	}
	if _, err := rr.r.ReadByte(); err == nil {
		t.Fatalf("decode %q: bytes left after the command", b)
	}
	return out
}

func TestTemplateSubstitution(t *testing.T) {
	tests := []struct {
		line, sha, key string
		want           []string
	}{
		{"CL.THROTTLE {key} 15 30 60", "", "k:00042", []string{"CL.THROTTLE", "k:00042", "15", "30", "60"}},
		{"PING", "", "k:1", []string{"PING"}},
		{"SET user:{key}:x {key}{key}", "", "ab", []string{"SET", "user:ab:x", "abab"}},
		{"EVALSHA {sha} 1 {key} 15 30 60 1", "f20c41", "k:7", []string{"EVALSHA", "f20c41", "1", "k:7", "15", "30", "60", "1"}},
		{`SET {key} "two words"`, "", "", []string{"SET", "", "two words"}},
		// A key with CRLF is binary-safe in a bulk string.
		{"SET {key} v", "", "a\r\nb", []string{"SET", "a\r\nb", "v"}},
	}
	for _, tt := range tests {
		tmpl, err := parseTemplate(tt.line, tt.sha)
		if err != nil {
			t.Fatalf("parseTemplate(%q): %v", tt.line, err)
		}
		enc := tmpl.appendCommand(nil, []byte(tt.key))
		if got := decodeCommand(t, enc); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q with key %q encodes %q, want %q", tt.line, tt.key, got, tt.want)
		}
		// Two commands back to back: appending must not disturb the first.
		two := tmpl.appendCommand(append([]byte(nil), enc...), []byte(tt.key))
		if !bytes.Equal(two, append(append([]byte(nil), enc...), enc...)) {
			t.Errorf("%q: appending twice = %q, want the encoding twice", tt.line, two)
		}
	}
	exact, _ := parseTemplate("SET {key} v", "")
	if got, want := string(exact.appendCommand(nil, []byte("k:1"))), "*3\r\n$3\r\nSET\r\n$3\r\nk:1\r\n$1\r\nv\r\n"; got != want {
		t.Errorf("SET encoding = %q, want %q", got, want)
	}
	if _, err := parseTemplate("   ", ""); err == nil {
		t.Error("parseTemplate(blank) succeeded, want an error")
	}
}

func TestAppendCommandDoesNotAllocate(t *testing.T) {
	tmpl, err := parseTemplate("CL.THROTTLE {key} 15 30 60", "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := newKeyGen("zipf", 1.1, 100000, "k:", 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	key := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		buf = buf[:0]
		for range 16 {
			key = g.appendKey(key[:0], g.next())
			buf = tmpl.appendCommand(buf, key)
		}
	})
	if allocs != 0 {
		t.Errorf("a pipeline of 16 commands allocates %.1f times, want 0", allocs)
	}
}

func TestKeyFormat(t *testing.T) {
	tests := []struct {
		keys   int
		prefix string
		i      uint64
		want   string
	}{
		{100000, "k:", 42, "k:00042"}, // width of 99999 is 5 digits
		{100000, "k:", 99999, "k:99999"},
		{10, "", 0, "0"},
		{1, "only", 0, "only0"},
		{1000001, "user:", 7, "user:0000007"},
	}
	for _, tt := range tests {
		g, err := newKeyGen("uniform", 0, tt.keys, tt.prefix, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(g.appendKey(nil, tt.i)); got != tt.want {
			t.Errorf("keys=%d prefix=%q: appendKey(%d) = %q, want %q", tt.keys, tt.prefix, tt.i, got, tt.want)
		}
	}
}

func TestKeyGenRanges(t *testing.T) {
	const draws = 200000
	for _, dist := range []string{"uniform", "zipf"} {
		for _, keys := range []int{1, 2, 10, 100000} {
			g, err := newKeyGen(dist, 1.1, keys, "k:", 7)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, keys)
			for range draws {
				i := g.next()
				if i >= uint64(keys) {
					t.Fatalf("%s keys=%d: next() = %d, outside [0, %d)", dist, keys, i, keys)
				}
				counts[i]++
			}
			if keys == 10 && dist == "uniform" {
				// Each of 10 keys expects 20000 draws; the standard deviation is
				// sqrt(200000 × 0.1 × 0.9) ≈ 134, so ±1000 is over 7 sigma.
				for i, c := range counts {
					if c < 19000 || c > 21000 {
						t.Errorf("uniform keys=10: key %d drawn %d times, want 20000 ± 1000", i, c)
					}
				}
			}
			if keys == 100000 && dist == "zipf" {
				// Zipf: index 0 is the hottest and frequencies fall with rank.
				// With s=1.1, P(0)/P(1) = 2^1.1 ≈ 2.14.
				if !(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[1000]) {
					t.Errorf("zipf counts[0,1,10,1000] = %d %d %d %d, want decreasing", counts[0], counts[1], counts[10], counts[1000])
				}
				if r := float64(counts[0]) / float64(counts[1]); r < 1.9 || r > 2.4 {
					t.Errorf("zipf counts[0]/counts[1] = %.2f, want about 2^1.1 = 2.14", r)
				}
			}
			if keys == 100000 && dist == "uniform" {
				// The hottest of 100000 keys at 2 expected draws each stays small.
				hot := 0
				for _, c := range counts {
					hot = max(hot, c)
				}
				if hot > 20 {
					t.Errorf("uniform: hottest key drawn %d times of %d, want about 2", hot, draws)
				}
			}
		}
	}
}

func TestKeyGenDeterministic(t *testing.T) {
	a, _ := newKeyGen("zipf", 1.2, 1000, "", 99)
	b, _ := newKeyGen("zipf", 1.2, 1000, "", 99)
	for i := range 1000 {
		if x, y := a.next(), b.next(); x != y {
			t.Fatalf("draw %d: %d != %d with the same seed", i, x, y)
		}
	}
}

func TestKeyGenBadInput(t *testing.T) {
	tests := []struct {
		dist string
		s    float64
		keys int
	}{
		{"zipf", 1, 10}, {"zipf", 0.5, 10}, {"normal", 0, 10}, {"uniform", 0, 0},
	}
	for _, tt := range tests {
		if _, err := newKeyGen(tt.dist, tt.s, tt.keys, "", 1); err == nil {
			t.Errorf("newKeyGen(%q, %g, %d) succeeded, want an error", tt.dist, tt.s, tt.keys)
		}
	}
}

func TestUsesSHA(t *testing.T) {
	if !usesSHA(presets()["lua-gcra"]) || usesSHA(presets()["gcra"]) || !strings.Contains(presets()["lua-gcra"], "EVALSHA") {
		t.Error("lua-gcra must be the only preset that needs the script digest")
	}
}

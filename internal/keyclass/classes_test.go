package keyclass

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/internal/glob"
)

func TestParseRules(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the result
		wantErr string
	}{
		{in: "", want: ""},
		{in: "login login:* api  api:v?:*", want: "login login:* api api:v?:*"},
		{in: "login", wantErr: "NAME PATTERN pairs"},
		{in: "other x:*", wantErr: "reserved"},
		{in: "a:b x:*", wantErr: "class name"},
		{in: "a x:* a y:*", wantErr: "given twice"},
		{in: strings.Repeat("n", MaxNameLen+1) + " x", wantErr: "class name"},
		{in: "a " + strings.Repeat("*", maxPatternLen+1), wantErr: "pattern longer"},
	}
	for _, tt := range tests {
		rs, err := ParseRules(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRules(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || rs.String() != tt.want {
			t.Errorf("ParseRules(%q) = %q, %v; want %q", tt.in, rs.String(), err, tt.want)
		}
	}
}

// TestRulesSet: each configuration line adds rules; "" clears them; a
// name given on two lines is refused.
func TestRulesSet(t *testing.T) {
	var rs Rules
	for _, line := range []string{"a a:*", "b b:* c c:*"} {
		if err := rs.Set(line); err != nil {
			t.Fatal(err)
		}
	}
	if got := rs.String(); got != "a a:* b b:* c c:*" {
		t.Fatalf("after two lines: %q", got)
	}
	if err := rs.Set("b x:*"); err == nil {
		t.Fatal("a name given twice was accepted")
	}
	if rs.String() != "a a:* b b:* c c:*" {
		t.Fatalf("a refused line changed the rules: %q", rs.String())
	}
	if err := rs.Set(""); err != nil || len(rs) != 0 {
		t.Fatalf(`Set("") = %v, rules %q`, err, rs.String())
	}
}

func mustRules(t *testing.T, v string) Rules {
	t.Helper()
	rs, err := ParseRules(v)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestClassify(t *testing.T) {
	c := New(Config{Rules: mustRules(t, "vip user:vip-* login login:* api *:api:*"), Limit: 3}, nil)
	tests := []struct{ key, want string }{
		{"user:vip-7", "vip"},    // first rule
		{"user:42", "user"},      // prefix 1
		{"login:alice", "login"}, // rule, not the prefix
		{"x:api:y", "api"},       // a rule matching beyond the prefix
		{"nocolon", Other},       // no prefix
		{":empty", Other},        // empty prefix
		{"bad prefix:x", Other},  // a space is no label
		{"bad\xffbyte:x", Other}, // neither is a byte above '~'
		{"ip:10.0.0.1", "ip"},    // prefix 2
		{"api:v1", "api"},        // a prefix named like a rule: that rule's class, no room taken
		{"other:x", Other},       // a prefix named like Other
		{"session:1", "session"}, // prefix 3: the limit reached
		{"order:1", Other},       // over the limit
		{"user:43", "user"},      // known prefixes still count
		{strings.Repeat("p", MaxNameLen+1) + ":x", Other},
	}
	for _, tt := range tests {
		if got := c.Classify([]byte(tt.key)).Name(); got != tt.want {
			t.Errorf("Classify(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	if n := c.Learned(); n != 3 {
		t.Errorf("Learned() = %d, want 3", n)
	}
	var names []string
	for _, k := range c.Counts() {
		names = append(names, k.Name+"/"+k.Kind.String())
	}
	want := "vip/rule login/rule api/rule user/prefix ip/prefix session/prefix other/other"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("Counts order = %q, want %q", got, want)
	}
}

func TestOff(t *testing.T) {
	if c := New(Config{}, nil); c != nil {
		t.Fatal("no rules and Limit 0 should be off (nil)")
	}
	c := New(Config{Limit: 0, Rules: mustRules(t, "a a:*")}, nil)
	if got := c.Classify([]byte("b:1")).Name(); got != Other {
		t.Fatalf("Limit 0: Classify(b:1) = %q, want other", got)
	}
}

func counts(c *Classes) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, k := range c.Counts() {
		out[k.Name] = [2]int64{k.Allowed, k.Limited}
	}
	return out
}

// TestLiveChange: a new configuration keeps the counts of the classes it
// keeps, drops the others, and classifies by its own rules at once.
func TestLiveChange(t *testing.T) {
	c1 := New(Config{Rules: mustRules(t, "login login:*"), Limit: 2}, nil)
	for _, k := range []string{"login:a", "user:1", "user:2", "ip:1", "zz:1"} {
		c1.Classify([]byte(k)).Count(1, false)
	}
	c1.Classify([]byte("user:3")).Count(2, true)
	tests := []struct {
		name string
		cfg  Config
		want map[string][2]int64
		key  string // classified after the change
		into string
	}{
		{"same", Config{Rules: mustRules(t, "login login:*"), Limit: 2},
			map[string][2]int64{"login": {1, 0}, "user": {2, 1}, "ip": {1, 0}, Other: {1, 0}}, "zz:2", Other},
		{"limit lowered", Config{Rules: mustRules(t, "login login:*"), Limit: 1},
			map[string][2]int64{"login": {1, 0}, "user": {2, 1}, Other: {1, 0}}, "ip:2", Other},
		{"limit raised", Config{Rules: mustRules(t, "login login:*"), Limit: 3},
			map[string][2]int64{"login": {1, 0}, "user": {2, 1}, "ip": {1, 0}, Other: {1, 0}}, "zz:2", "zz"},
		{"rule removed", Config{Limit: 2},
			map[string][2]int64{"user": {2, 1}, "ip": {1, 0}, Other: {1, 0}}, "login:b", Other},
		{"rule added first", Config{Rules: mustRules(t, "all * login login:*"), Limit: 2},
			map[string][2]int64{"all": {0, 0}, "login": {1, 0}, "user": {2, 1}, "ip": {1, 0}, Other: {1, 0}}, "login:b", "all"},
		{"prefix becomes a rule", Config{Rules: mustRules(t, "user u:*"), Limit: 2},
			map[string][2]int64{"user": {2, 1}, "ip": {1, 0}, Other: {1, 0}}, "u:1", "user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c2 := New(tt.cfg, c1)
			got := counts(c2)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("counts = %v, want %v", got, tt.want)
			}
			if n := c2.Classify([]byte(tt.key)).Name(); n != tt.into {
				t.Errorf("Classify(%q) = %q, want %q", tt.key, n, tt.into)
			}
		})
	}
}

// TestTally: counts gathered in a tally show only after Flush, on their
// classes, whatever the number of classes touched.
func TestTally(t *testing.T) {
	c := New(Config{Limit: 20}, nil)
	var tl Tally
	want := map[string][2]int64{}
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("p%d", i%11) // more classes than a tally holds
		limited := i%3 == 0
		c.Count(&tl, []byte(name+":x"), limited)
		w := want[name]
		if limited {
			w[1]++
		} else {
			w[0]++
		}
		want[name] = w
	}
	tl.Flush(7)
	if tl.Pending() {
		t.Fatal("Pending after Flush")
	}
	got := counts(c)
	delete(got, Other)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after Flush: %v, want %v", got, want)
	}
	c.Count(&tl, []byte("p0:y"), true)
	if got := counts(c)["p0"]; got != want["p0"] {
		t.Errorf("before Flush: p0 = %v, want %v (not yet flushed)", got, want["p0"])
	}
	if !tl.Pending() {
		t.Error("no Pending after Count")
	}
}

// TestTallyAllocs: counting into a tally and flushing allocate nothing
// once the tally and its cache hold their buffers.
func TestTallyAllocs(t *testing.T) {
	c := New(Config{Limit: 100}, nil)
	var tl Tally
	keys := [][]byte{[]byte("user:1"), []byte("ip:2"), []byte("x")}
	for _, k := range keys {
		c.Count(&tl, k, false)
	}
	tl.Flush(0)
	if n := testing.AllocsPerRun(1000, func() {
		for _, k := range keys {
			c.Count(&tl, k, true)
		}
		tl.Flush(1)
	}); n != 0 {
		t.Errorf("Count and Flush allocate %.1f times per run, want 0", n)
	}
}

func TestReset(t *testing.T) {
	c := New(Config{Limit: 5}, nil)
	c.Classify([]byte("a:1")).Count(0, true)
	c.Classify([]byte("x")).Count(0, false)
	c.Reset()
	for _, k := range c.Counts() {
		if k.Allowed != 0 || k.Limited != 0 {
			t.Errorf("after Reset: %+v", k)
		}
	}
	if c.Learned() != 1 {
		t.Errorf("Reset forgot the prefix classes")
	}
}

func TestClassifyAllocs(t *testing.T) {
	c := New(Config{Rules: mustRules(t, "login login:*"), Limit: 100}, nil)
	keys := [][]byte{[]byte("user:1"), []byte("login:x"), []byte("nocolon"), []byte("ip:1.2.3.4")}
	for _, k := range keys {
		c.Classify(k) // learn
	}
	n := testing.AllocsPerRun(1000, func() {
		for _, k := range keys {
			c.Classify(k).Count(3, false)
		}
	})
	if n != 0 {
		t.Errorf("Classify allocates %.1f times per run, want 0", n)
	}
}

// TestConcurrent: many goroutines learning and counting at once never
// exceed the limit and lose no count.
func TestConcurrent(t *testing.T) {
	const limit, workers, per = 10, 8, 2000
	c := New(Config{Limit: limit}, nil)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				c.Classify([]byte(fmt.Sprintf("p%d:%d", i%50, w))).Count(int64(w), i%3 == 0)
			}
		}(w)
	}
	wg.Wait()
	if n := c.Learned(); n != limit {
		t.Errorf("Learned() = %d, want %d", n, limit)
	}
	var total int64
	for _, k := range c.Counts() {
		total += k.Allowed + k.Limited
	}
	if total != workers*per {
		t.Errorf("counted %d decisions, want %d", total, workers*per)
	}
}

func BenchmarkClassify(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rules string
	}{{"prefix", ""}, {"rules3", "vip user:vip-* login login:* api *:api:*"}} {
		b.Run(bc.name, func(b *testing.B) {
			rs, _ := ParseRules(bc.rules)
			c := New(Config{Rules: rs, Limit: DefaultLimit}, nil)
			key := []byte("user:1234567")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.Classify(key).Count(1, false)
				}
			})
		})
	}
}

// TestRuleCap: more than MaxRules rules are refused, by ParseRules and by
// lines that add up past the cap, with the count and the cap.
func TestRuleCap(t *testing.T) {
	rules := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, "c%d c%d:* ", i, i)
		}
		return b.String()
	}
	if _, err := ParseRules(rules(0, MaxRules)); err != nil {
		t.Fatalf("ParseRules(%d rules) = %v", MaxRules, err)
	}
	tests := []struct {
		name string
		set  func() error
		want string
	}{
		{"ParseRules", func() error { _, err := ParseRules(rules(0, 5000)); return err }, "keyclass: bad rule: too many rules: 5000, at most 1024"},
		{"lines adding up", func() error {
			var rs Rules
			if err := rs.Set(rules(0, 1000)); err != nil {
				return err
			}
			return rs.Set(rules(1000, 25))
		}, "keyclass: bad rule: too many rules: 1025, at most 1024"},
	}
	for _, tt := range tests {
		err := tt.set()
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrRule) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestClassifyFirstRule: on random keys, the compiled rules give the
// class of the first rule whose glob matches, as a scan in order does.
func TestClassifyFirstRule(t *testing.T) {
	rs := mustRules(t, "vip user:vip-* any *:api:* short ?:* cls [a-c]*:x* long *a*a*a*b")
	c := New(Config{Rules: rs}, nil)
	r := rand.New(rand.NewSource(5))
	const alphabet = "abcuser:vip-x"
	for k := 0; k < 5000; k++ {
		key := make([]byte, r.Intn(14))
		for i := range key {
			key[i] = alphabet[r.Intn(len(alphabet))]
		}
		want := Other
		for _, rule := range rs {
			if glob.Match([]byte(rule.Pattern), key) {
				want = rule.Name
				break
			}
		}
		if got := c.Classify(key).Name(); got != want {
			t.Fatalf("Classify(%q) = %q, want %q", key, got, want)
		}
	}
}

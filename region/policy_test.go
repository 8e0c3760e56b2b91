package region

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/shards"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the policy; "" with wantErr
		wantErr bool
	}{
		{"", "", false},
		{"user:* split", "user:* split", false},
		{"api:* global eu  user:* SPLIT  * local", "api:* global eu user:* split * local", false},
		{"user:*", "", true},
		{"user:* everywhere", "", true},
		{"user:* global", "", true},
	}
	for _, tt := range tests {
		p, err := ParsePolicy(strings.Fields(tt.in))
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParsePolicy(%q) = %q, want an error", tt.in, p.String())
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePolicy(%q): %v", tt.in, err)
			continue
		}
		if got := p.String(); got != tt.want {
			t.Errorf("ParsePolicy(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestParsePolicyCaps: more than glob.MaxRules rules, or a pattern longer
// than glob.MaxPatternLen, are refused with the count or the rule and the
// cap.
func TestParsePolicyCaps(t *testing.T) {
	rules := func(n int, pattern string) []string {
		var w []string
		for i := 0; i < n; i++ {
			w = append(w, pattern, "local")
		}
		return w
	}
	tests := []struct {
		name  string
		words []string
		want  string // "" for no error
	}{
		{"at the cap", rules(glob.MaxRules, "user:*"), ""},
		{"over the cap", rules(5000, "user:*"), "region-policy: too many rules: 5000, at most 1024"},
		{"pattern too long", rules(1, strings.Repeat("a", glob.MaxPatternLen+1)), "region-policy: rule 1: pattern too long: 513 bytes, at most 512"},
	}
	for _, tt := range tests {
		_, err := ParsePolicy(tt.words)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: ParsePolicy = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPolicyMatchFirstWins(t *testing.T) {
	p, err := ParsePolicy(strings.Fields("api:eu:* local api:* global us user:? split"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  string
		want Rule
	}{
		{"api:eu:1", Rule{Pattern: "api:eu:*", Mode: ModeLocal}},
		{"api:us:1", Rule{Pattern: "api:*", Mode: ModeGlobal, Home: "us"}},
		{"user:7", Rule{Pattern: "user:?", Mode: ModeSplit}},
		{"user:77", Rule{Mode: ModeLocal}},
		{"", Rule{Mode: ModeLocal}},
	}
	for _, tt := range tests {
		if got := p.Match([]byte(tt.key)); got != tt.want {
			t.Errorf("Match(%q) = %+v, want %+v", tt.key, got, tt.want)
		}
	}
}

func TestScale(t *testing.T) {
	s := int64(1e9)
	tests := []struct {
		name     string
		req      engine.Request
		num, den int64
		want     engine.Request
		ok       bool
	}{
		{"gcra third", engine.Request{Kind: engine.KindGCRA, Burst: 99, Rate: 30, Period: s, Quantity: 1},
			1, 3, engine.Request{Kind: engine.KindGCRA, Burst: 32, Rate: 30, Period: 3 * s, Quantity: 1}, true},
		{"gcra one per hour splits", engine.Request{Kind: engine.KindGCRA, Burst: 99, Rate: 1, Period: 3600 * s, Quantity: 1},
			1, 4, engine.Request{Kind: engine.KindGCRA, Burst: 24, Rate: 1, Period: 4 * 3600 * s, Quantity: 1}, true},
		{"period rounded up", engine.Request{Kind: engine.KindGCRA, Burst: 2, Rate: 1, Period: 10, Quantity: 1},
			1, 3, engine.Request{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: 30, Quantity: 1}, true},
		{"longest period: the count scales instead", engine.Request{Kind: engine.KindGCRA, Burst: 99, Rate: 30, Period: engine.MaxPeriod, Quantity: 1},
			1, 3, engine.Request{Kind: engine.KindGCRA, Burst: 32, Rate: 10, Period: engine.MaxPeriod, Quantity: 1}, true},
		{"gcra share of nothing", engine.Request{Kind: engine.KindGCRA, Burst: 1, Rate: 30, Period: s, Quantity: 1},
			1, 3, engine.Request{}, false},
		{"token bucket weighted", engine.Request{Kind: engine.KindTokenBucket, Burst: 100, Rate: 10, Period: s, Quantity: 1},
			2, 5, engine.Request{Kind: engine.KindTokenBucket, Burst: 40, Rate: 10, Period: 2500 * 1e6, Quantity: 1}, true},
		{"leaky bucket", engine.Request{Kind: engine.KindLeakyBucket, Burst: 9, Rate: 3, Period: s, Quantity: 2},
			1, 3, engine.Request{Kind: engine.KindLeakyBucket, Burst: 3, Rate: 3, Period: 3 * s, Quantity: 2}, true},
		{"fixed window", engine.Request{Kind: engine.KindFixedWindow, Burst: 1000, Period: s, Quantity: 1},
			1, 3, engine.Request{Kind: engine.KindFixedWindow, Burst: 333, Period: s, Quantity: 1}, true},
		{"sliding log rounds to nothing", engine.Request{Kind: engine.KindSlidingLog, Burst: 2, Period: s, Quantity: 1},
			1, 3, engine.Request{}, false},
		{"whole", engine.Request{Kind: engine.KindSlidingWindow, Burst: 7, Period: s, Quantity: 1},
			3, 3, engine.Request{Kind: engine.KindSlidingWindow, Burst: 7, Period: s, Quantity: 1}, true},
	}
	for _, tt := range tests {
		got, ok := Scale(tt.req, tt.num, tt.den)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("%s: Scale(%+v, %d, %d) = %+v, %v; want %+v, %v", tt.name, tt.req, tt.num, tt.den, got, ok, tt.want, tt.ok)
		}
	}
}

// TestScaleSharesNeverExceedTheWhole: for any weights, the regions' shares
// of a limit add up to at most the limit (split's promise).
func TestScaleSharesNeverExceedTheWhole(t *testing.T) {
	weights := [][]int64{{1, 1, 1}, {1, 2, 3}, {7, 1}, {5, 5, 5, 5, 5, 5, 5}, {1 << 20, 1, 3}}
	for _, ws := range weights {
		var total int64
		for _, w := range ws {
			total += w
		}
		for _, limit := range []int64{1, 2, 3, 10, 99, 1000, 12345, engine.MaxCount} {
			for _, period := range []int64{1, 7, 1e9, 3600e9, engine.MaxPeriod} {
				req := engine.Request{Kind: engine.KindGCRA, Burst: limit - 1, Rate: limit, Period: period, Quantity: 1}
				var sumLimit int64
				sumRate := new(big.Rat) // counts per ns
				for _, w := range ws {
					if r, ok := Scale(req, w, total); ok {
						sumLimit += r.Burst + 1
						sumRate.Add(sumRate, big.NewRat(r.Rate, r.Period))
					}
				}
				if sumLimit > limit || sumRate.Cmp(big.NewRat(limit, period)) > 0 {
					t.Errorf("weights %v, limit %d per %d ns: shares add up to limit %d, rate %s per ns", ws, limit, period, sumLimit, sumRate)
				}
			}
		}
	}
}

func TestExecRoundTrip(t *testing.T) {
	op := shards.Op{Code: shards.OpLimitAll, Keys: [][]byte{[]byte("a b"), []byte("")},
		Reqs: []engine.Request{
			{Kind: engine.KindGCRA, Burst: 5, Rate: 2, Period: 1e9, Quantity: 3},
			{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: 60e9, Quantity: 0},
		}}
	args := encodeExec("us", "eu", &op)
	call, err := DecodeExec(args[1:], engine.DefaultMaxLogLimit)
	if err != nil {
		t.Fatal(err)
	}
	if call.Origin != "us" || call.Target != "eu" || call.Op.Code != op.Code || len(call.Op.Keys) != 2 ||
		string(call.Op.Keys[0]) != "a b" || call.Op.Reqs[0] != op.Reqs[0] || call.Op.Reqs[1] != op.Reqs[1] {
		t.Fatalf("DecodeExec(encodeExec(op)) = %+v, want %+v", call.Op, op)
	}
	tb := shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")},
		Reqs: []engine.Request{{Kind: engine.KindTokenBucket, Burst: 5, Rate: 2, Period: 1e9, Quantity: 1, Interval: true}}}
	call, err = DecodeExec(encodeExec("us", "eu", &tb)[1:], engine.DefaultMaxLogLimit)
	if err != nil || call.Op.Reqs[0] != tb.Reqs[0] {
		t.Fatalf("token bucket round trip = %+v, %v", call.Op.Reqs, err)
	}
	// The shadow flag (limit-shadow where the request entered) and exact
	// travel to the home.
	sh := shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")},
		Reqs: []engine.Request{{Kind: engine.KindFixedWindow, Burst: 5, Period: 1e9, Quantity: 1, Shadow: true, Exact: true}}}
	call, err = DecodeExec(encodeExec("us", "eu", &sh)[1:], engine.DefaultMaxLogLimit)
	if err != nil || call.Op.Reqs[0] != sh.Reqs[0] {
		t.Fatalf("shadow, exact round trip = %+v, %v", call.Op.Reqs, err)
	}
	// A concurrency request carries its op and lease (ONE only).
	cc := shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")},
		Reqs: []engine.Request{{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Lease: "job 7", Burst: 5, Period: 1e9, Quantity: 2}}}
	args = encodeExec("us", "eu", &cc)
	call, err = DecodeExec(args[1:], engine.DefaultMaxLogLimit)
	if err != nil || call.Op.Reqs[0] != cc.Reqs[0] || string(call.Op.Keys[0]) != "k" {
		t.Fatalf("concurrency round trip = %+v, %v", call.Op, err)
	}
	if keys := ExecKeys(nil, args); len(keys) != 1 || string(keys[0]) != "k" {
		t.Fatalf("ExecKeys(%q) = %q, want [k]", args, keys)
	}
}

func TestDecodeExecRefusesMalformed(t *testing.T) {
	good := []string{"us", "eu", "ONE", "k", "gcra", "5", "2", "1000000000", "1", "0"}
	with := func(i int, v string) []string {
		a := append([]string(nil), good...)
		a[i] = v
		return a
	}
	tests := []struct {
		name string
		args []string
	}{
		{"too few", good[:9]},
		{"extra field", append(append([]string(nil), good...), "x")},
		{"bad how", with(2, "SOME")},
		{"two keys with ONE", append(append([]string(nil), good...), good[3:]...)},
		{"unknown kind", with(4, "bucket")},
		{"kind none", with(4, "none")},
		{"burst not a number", with(5, "5x")},
		{"zero rate", with(6, "0")},
		{"negative period", with(7, "-1")},
		{"quantity beyond range", with(8, "9999999999999999")},
		{"interval on gcra", with(9, "1")},
		{"flags not a number", with(9, "yes")},
		{"unknown flag", with(9, "16")},
		{"lease flag without its fields", with(9, "8")},
		{"lease fields without the flag", append(append([]string(nil), good...), "1", "job")},
		{"lease in ALL", []string{"us", "eu", "ALL", "k", "concurrency", "5", "0", "1000000000", "1", "8", "1", "job"}},
		{"release with a burst", []string{"us", "eu", "ONE", "k", "concurrency", "5", "0", "0", "0", "8", "2", "job"}},
		{"negative quantity in ALL", with(2, "ALL")[:0]}, // replaced below
		{"window with a rate", []string{"us", "eu", "ONE", "k", "fixed-window", "5", "2", "1000000000", "1", "0"}},
		{"sliding log beyond the maximum", []string{"us", "eu", "ONE", "k", "sliding-log", "1000000", "0", "1000000000", "1", "0"}},
		{"ALL of a token bucket", []string{"us", "eu", "ALL", "k", "token-bucket", "5", "2", "1000000000", "1", "0"}},
	}
	for i := range tests {
		if tests[i].name == "negative quantity in ALL" {
			tests[i].args = []string{"us", "eu", "ALL", "k", "gcra", "5", "2", "1000000000", "-1", "0"}
		}
	}
	for _, tt := range tests {
		args := make([][]byte, len(tt.args))
		for i, a := range tt.args {
			args[i] = []byte(a)
		}
		if _, err := DecodeExec(args, 1000); !errors.Is(err, ErrBadBatch) {
			t.Errorf("%s: DecodeExec(%q) = %v, want ErrBadBatch", tt.name, tt.args, err)
		}
	}
}

package region_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
)

// t0 is the fake clock's start (Unix ns).
const t0 = int64(1_700_000_000) * 1e9

// fakeClock is every region's clock in these tests: decisions happen at
// instants the test sets, so that a limit's arithmetic is exact.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() int64 { return c.ns.Load() }

// testRegion is one region: a standalone server (decide.Local) with a Gate in
// front, serving RESP on loopback, as cmd/cellserver wires it.
type testRegion struct {
	name  string
	addr  string
	gate  *region.Gate
	store *shards.Store
	srv   *resp.Server
	ln    net.Listener
	done  chan error
	cfg   region.Config // to start it again
	pass  string
}

// regionSpec configures one region of startRegions.
type regionSpec struct {
	name        string
	policy      string
	weight      int64
	unreachable region.Unreachable
	password    string // this region's requirepass
	// dialPassword, when set, is the password the other regions send to
	// this one (a wrong one); otherwise password.
	dialPassword string
	backlog      int64        // region-backlog-bytes (0: the default)
	logger       *slog.Logger // nil: discarded
}

// startRegions starts one region per spec, each a peer of all the others.
func startRegions(t *testing.T, clock *fakeClock, specs ...regionSpec) map[string]*testRegion {
	t.Helper()
	out := map[string]*testRegion{}
	lns := map[string]net.Listener{}
	for _, s := range specs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[s.name] = ln
	}
	for _, s := range specs {
		cfg := region.Config{Name: s.name, Timeout: 2 * time.Second, MaxLogLimit: engine.DefaultMaxLogLimit,
			Weights: map[string]int64{}, Unreachable: s.unreachable, Now: clock.Now, BacklogBytes: s.backlog, Logger: s.logger}
		for _, p := range specs {
			if p.weight > 0 {
				cfg.Weights[p.name] = p.weight
			}
			if p.name != s.name {
				pw := p.password
				if p.dialPassword != "" {
					pw = p.dialPassword
				}
				cfg.Peers = append(cfg.Peers, region.PeerConfig{Name: p.name, Addrs: []string{lns[p.name].Addr().String()}, Password: pw})
			}
		}
		pol, err := region.ParsePolicy(strings.Fields(s.policy))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Policy = pol
		out[s.name] = serveRegion(t, clock, cfg, s.password, lns[s.name])
	}
	return out
}

// serveRegion starts a region of cfg, with an empty keyspace, on ln.
func serveRegion(t *testing.T, clock *fakeClock, cfg region.Config, password string, ln net.Listener) *testRegion {
	t.Helper()
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	g, err := region.New(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	r := &testRegion{name: cfg.Name, addr: ln.Addr().String(), gate: g, store: store, cfg: cfg, pass: password}
	r.serve(t, clock, ln)
	t.Cleanup(r.stop)
	return r
}

// serve starts r's RESP server, in front of its gate, on ln.
func (r *testRegion) serve(t *testing.T, clock *fakeClock, ln net.Listener) {
	t.Helper()
	rc := resp.DefaultConfig()
	rc.Addr = ln.Addr().String()
	rc.Now = clock.Now
	rc.EventLoops = 0
	rc.Logger = slog.New(slog.DiscardHandler)
	rc.RequirePass = r.pass
	rc.Regions = r.gate
	srv, err := resp.NewServer(rc, r.gate)
	if err != nil {
		t.Fatal(err)
	}
	resp.RegisterRegions(srv, r.gate)
	r.srv, r.ln, r.done = srv, ln, make(chan error, 1)
	go func() { r.done <- srv.Serve(ln) }()
}

// closeServer stops r's RESP server only: its gate and keyspace stay, and
// serve starts it again.
func (r *testRegion) closeServer() {
	_ = r.srv.Close()
	<-r.done
}

// restartRegion starts old's region again on addr, with an empty keyspace.
func restartRegion(t *testing.T, clock *fakeClock, old *testRegion, addr, _ string) *testRegion {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return serveRegion(t, clock, old.cfg, old.pass, ln)
}

// stop shuts the region's server down (idempotent).
func (r *testRegion) stop() {
	if r.srv == nil {
		return
	}
	_ = r.srv.Close()
	<-r.done
	r.gate.Close()
	r.srv = nil
}

// limit runs one limiter request through the region's gate.
func (r *testRegion) limit(t *testing.T, key string, req engine.Request) shards.Result {
	t.Helper()
	ops := []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte(key)}, Reqs: []engine.Request{req}}}
	res := make([]shards.Result, 1)
	if err := r.gate.Write(context.Background(), ops, res); err != nil {
		t.Fatalf("%s: Write: %v", r.name, err)
	}
	return res[0]
}

func gcra(burst, rate int64, period time.Duration, q int64) engine.Request {
	return engine.Request{Kind: engine.KindGCRA, Burst: burst, Rate: rate, Period: int64(period), Quantity: q}
}

func TestGlobalKeyDecidedAtHome(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "api:* global us"
	rs := startRegions(t, clock, regionSpec{name: "us", policy: pol}, regionSpec{name: "eu", policy: pol}, regionSpec{name: "ap", policy: pol})
	req := gcra(9, 1, time.Hour, 1) // limit 10, next token in 6 minutes
	allowed := 0
	for i := range 15 {
		r := rs[[]string{"us", "eu", "ap"}[i%3]]
		res := r.limit(t, "api:k", req)
		if res.Err != nil {
			t.Fatalf("request %d from %s: %v", i, r.name, res.Err)
		}
		if !res.Results[0].Limited {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("allowed %d across three regions, want exactly the limit 10", allowed)
	}
	if _, ok := rs["us"].store.Lookup([]byte("api:k"), clock.Now()); !ok {
		t.Error("the home region holds no state for the key")
	}
	for _, n := range []string{"eu", "ap"} {
		if _, ok := rs[n].store.Lookup([]byte("api:k"), clock.Now()); ok {
			t.Errorf("region %s holds state for a key whose home is us", n)
		}
	}
	st := rs["us"].gate.Status()
	for _, p := range st.Peers {
		if p.Served != 5 {
			t.Errorf("us served %d decisions for %s, want 5", p.Served, p.Name)
		}
	}
	// A key matching no rule stays local.
	if res := rs["eu"].limit(t, "other", req); res.Err != nil || res.Results[0].Limited {
		t.Fatalf("local key: %+v", res)
	}
	if _, ok := rs["us"].store.Lookup([]byte("other"), clock.Now()); ok {
		t.Error("a local key of eu reached us")
	}
}

func TestSplitKeyShares(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "user:* split"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol, weight: 2}, regionSpec{name: "b", policy: pol}, regionSpec{name: "c", policy: pol})
	fw := engine.Request{Kind: engine.KindFixedWindow, Burst: 100, Period: int64(time.Hour), Quantity: 1}
	want := map[string]int{"a": 50, "b": 25, "c": 25}
	total := 0
	for name, r := range rs {
		got := 0
		for range 200 {
			res := r.limit(t, "user:1", fw)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if !res.Results[0].Limited {
				got++
			}
			if l := res.Results[0].Limit; l != int64(want[name]) {
				t.Fatalf("%s reports limit %d, want its share %d", name, l, want[name])
			}
		}
		if got != want[name] {
			t.Errorf("%s admitted %d, want its share %d", name, got, want[name])
		}
		total += got
	}
	if total > 100 {
		t.Errorf("regions admitted %d in total, more than the limit 100", total)
	}
	// A share that rounds to nothing refuses, consuming nothing.
	res := rs["b"].limit(t, "user:2", engine.Request{Kind: engine.KindSlidingLog, Burst: 3, Period: int64(time.Hour), Quantity: 1})
	if res.Err != nil || !res.Results[0].Limited || res.Results[0].RetryAfter != -1 {
		t.Errorf("a share of nothing answered %+v, want limited for good", res)
	}
	if _, ok := rs["b"].store.Lookup([]byte("user:2"), clock.Now()); ok {
		t.Error("a refused share created the key")
	}
}

func TestGlobalHomeUnreachable(t *testing.T) {
	tests := []struct {
		mode  region.Unreachable
		check func(t *testing.T, eu *testRegion, res shards.Result)
	}{
		{region.UnreachableAnswerError, func(t *testing.T, eu *testRegion, res shards.Result) {
			var ue *region.UnreachableError
			if !errors.As(res.Err, &ue) || ue.Region != "us" {
				t.Errorf("answer %+v, want an UnreachableError naming us", res)
			}
		}},
		{region.UnreachableLocal, func(t *testing.T, eu *testRegion, res shards.Result) {
			if res.Err != nil || res.Results[0].Limited || res.Results[0].Limit != 10 {
				t.Errorf("answer %+v, want decided here with the whole limit", res)
			}
			if _, ok := eu.store.Lookup([]byte("api:k"), t0); !ok {
				t.Error("decided locally but no local state")
			}
		}},
		{region.UnreachableDeny, func(t *testing.T, eu *testRegion, res shards.Result) {
			if res.Err != nil || !res.Results[0].Limited {
				t.Errorf("answer %+v, want refused", res)
			}
			if _, ok := eu.store.Lookup([]byte("api:k"), t0); ok {
				t.Error("a denial created local state")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			clock := &fakeClock{}
			clock.ns.Store(t0)
			pol := "api:* global us"
			rs := startRegions(t, clock, regionSpec{name: "us", policy: pol}, regionSpec{name: "eu", policy: pol, unreachable: tt.mode})
			rs["us"].stop()
			tt.check(t, rs["eu"], rs["eu"].limit(t, "api:k", gcra(9, 1, time.Hour, 1)))
			st := rs["eu"].gate.Status()
			if st.Fallbacks != 1 || st.Peers[0].State != "down" || st.Peers[0].LastError == "" {
				t.Errorf("status %+v, want one fallback and us down with its error", st)
			}
		})
	}
}

func TestPeerPasswordAndNames(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "api:* global us"
	rs := startRegions(t, clock, regionSpec{name: "us", policy: pol, password: "s3cret"}, regionSpec{name: "eu", policy: pol})
	if res := rs["eu"].limit(t, "api:k", gcra(9, 1, time.Hour, 1)); res.Err != nil {
		t.Fatalf("with the right password: %v", res.Err)
	}
	// A call naming the wrong target or an unknown origin is refused and
	// applies nothing.
	us := rs["us"].gate
	calls := []struct {
		origin, target string
		want           error
	}{
		{"eu", "asia", region.ErrWrongRegion},
		{"mars", "us", region.ErrUnknownPeer},
	}
	for _, c := range calls {
		call := region.ExecCall{Origin: c.origin, Target: c.target,
			Op: shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("api:x")}, Reqs: []engine.Request{gcra(9, 1, time.Hour, 1)}}}
		var res shards.Result
		if err := us.Exec(context.Background(), &call, &res); !errors.Is(err, c.want) {
			t.Errorf("Exec from %s to %s = %v, want %v", c.origin, c.target, err, c.want)
		}
	}
	if _, ok := rs["us"].store.Lookup([]byte("api:x"), clock.Now()); ok {
		t.Error("a refused call was applied")
	}
	if got := us.Status().Refused; got != 2 {
		t.Errorf("refused = %d, want 2", got)
	}
}

func TestWrongPeerPasswordIsUnreachable(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "api:* global us"
	rs := startRegions(t, clock, regionSpec{name: "us", policy: pol, password: "right", dialPassword: "wrong"}, regionSpec{name: "eu", policy: pol})
	res := rs["eu"].limit(t, "api:k", gcra(9, 1, time.Hour, 1))
	var ue *region.UnreachableError
	if !errors.As(res.Err, &ue) {
		t.Fatalf("with a wrong password: %+v, want unreachable", res)
	}
	if _, ok := rs["us"].store.Lookup([]byte("api:k"), clock.Now()); ok {
		t.Error("applied with a wrong password")
	}
}

func TestMixedModesAndTransactions(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "api:* global us user:* split"
	rs := startRegions(t, clock, regionSpec{name: "us", policy: pol}, regionSpec{name: "eu", policy: pol})
	eu := rs["eu"]
	ops := []shards.Op{
		{Code: shards.OpLimitAll, Keys: [][]byte{[]byte("api:1"), []byte("user:1")}, Reqs: []engine.Request{gcra(9, 1, time.Hour, 1), gcra(9, 1, time.Hour, 1)}},
		{Code: shards.OpLimit, Keys: [][]byte{[]byte("user:1")}, Reqs: []engine.Request{gcra(9, 1, time.Hour, 1)}},
	}
	res := make([]shards.Result, 2)
	if err := eu.gate.Write(context.Background(), ops, res); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, region.ErrMixedModes) {
		t.Errorf("THROTTLEALL over two modes = %+v, want ErrMixedModes", res[0])
	}
	if res[1].Err != nil || res[1].Results[0].Limit != 5 {
		t.Errorf("the split op beside it = %+v, want decided with the share 5", res[1])
	}
	ops = []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte("api:1")}, Reqs: []engine.Request{gcra(9, 1, time.Hour, 1)}}}
	res = make([]shards.Result, 1)
	if err := eu.gate.WriteAtomic(context.Background(), ops, res); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, region.ErrGlobalInTransaction) {
		t.Errorf("a global key in a transaction = %+v, want ErrGlobalInTransaction", res[0])
	}
	// The policy changes live; a home that is no region is refused.
	bad, _ := region.ParsePolicy([]string{"x:*", "global", "mars"})
	if err := eu.gate.SetPolicy(bad); err == nil {
		t.Error("SetPolicy accepted a home that is no region")
	}
	good, _ := region.ParsePolicy([]string{"api:*", "local"})
	if err := eu.gate.SetPolicy(good); err != nil {
		t.Fatal(err)
	}
	if r := eu.limit(t, "api:1", gcra(9, 1, time.Hour, 1)); r.Err != nil || r.Results[0].Limit != 10 {
		t.Errorf("after the change: %+v, want local with the whole limit", r)
	}
}

// TestGlobalEveryAlgorithm: every limiter kind, forwarded from two regions
// to its home, admits exactly what the home alone would.
func TestGlobalEveryAlgorithm(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "k:* global h"
	rs := startRegions(t, clock, regionSpec{name: "h", policy: pol}, regionSpec{name: "x", policy: pol}, regionSpec{name: "y", policy: pol})
	hour := int64(time.Hour)
	reqs := []engine.Request{
		{Kind: engine.KindGCRA, Burst: 6, Rate: 1, Period: hour, Quantity: 1},
		{Kind: engine.KindTokenBucket, Burst: 7, Rate: 1, Period: hour, Quantity: 1},
		{Kind: engine.KindTokenBucket, Burst: 7, Rate: 1, Period: hour, Quantity: 1, Interval: true},
		{Kind: engine.KindLeakyBucket, Burst: 7, Rate: 1, Period: hour, Quantity: 1},
		{Kind: engine.KindFixedWindow, Burst: 7, Period: hour, Quantity: 1},
		{Kind: engine.KindSlidingWindow, Burst: 7, Period: hour, Quantity: 1},
		{Kind: engine.KindSlidingLog, Burst: 7, Period: hour, Quantity: 1},
	}
	for i, req := range reqs {
		key := "k:" + req.Kind.String() + strconv.Itoa(i)
		allowed := 0
		for j := range 12 {
			r := rs[[]string{"x", "y", "h"}[j%3]]
			res := r.limit(t, key, req)
			if res.Err != nil {
				t.Fatalf("%s from %s: %v", key, r.name, res.Err)
			}
			if !res.Results[0].Limited {
				allowed++
			}
		}
		if allowed != 7 {
			t.Errorf("%s: %d allowed across regions, want exactly 7", key, allowed)
		}
	}
}

// TestAsyncThrottleAll: a CL.THROTTLEALL of async keys ships every key's
// consumption when it admits, nothing when it refuses.
func TestAsyncThrottleAll(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	all := func(q int64) shards.Result {
		ops := []shards.Op{{Code: shards.OpLimitAll, Keys: [][]byte{[]byte("c:1"), []byte("c:2")},
			Reqs: []engine.Request{gcra(9, 1, time.Hour, q), gcra(2, 1, time.Hour, q)}}}
		res := make([]shards.Result, 1)
		if err := rs["a"].gate.Write(context.Background(), ops, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := all(2); r.Err != nil || r.Results[0].Limited || r.Results[1].Limited {
		t.Fatalf("first call: %+v", r)
	}
	if r := all(2); !r.Results[1].Limited {
		t.Fatalf("second call: %+v, want c:2 limited", r)
	}
	rs["a"].gate.Sync()
	// b saw exactly the first call: c:2 (limit 3) has 1 left, c:1 8.
	for key, want := range map[string]int64{"c:1": 8, "c:2": 1} {
		res := rs["b"].limit(t, key, gcra(map[string]int64{"c:1": 9, "c:2": 2}[key], 1, time.Hour, 0))
		if res.Err != nil || res.Results[0].Remaining != want {
			t.Errorf("b peeks %s: %+v, want %d remaining", key, res, want)
		}
	}
}

// TestGlobalPipelined: global ops of one Write (a client's pipeline) reach
// their home in order, on one connection, and answer in order.
func TestGlobalPipelined(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "g:* global h"
	rs := startRegions(t, clock, regionSpec{name: "h", policy: pol}, regionSpec{name: "x", policy: pol})
	var ops []shards.Op
	for range 4 {
		ops = append(ops, shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("g:1")}, Reqs: []engine.Request{gcra(1, 1, time.Hour, 1)}})
	}
	ops = append(ops, shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("local")}, Reqs: []engine.Request{gcra(1, 1, time.Hour, 1)}})
	res := make([]shards.Result, len(ops))
	if err := rs["x"].gate.Write(context.Background(), ops, res); err != nil {
		t.Fatal(err)
	}
	want := []bool{false, false, true, true, false} // limit 2, then limited; the local key allowed
	for i, r := range res {
		if r.Err != nil || r.Results[0].Limited != want[i] {
			t.Errorf("op %d: %+v, want limited %v", i, r, want[i])
		}
	}
	if _, ok := rs["x"].store.Lookup([]byte("local"), clock.Now()); !ok {
		t.Error("the local op of the pipeline was not applied here")
	}
}

// TestLeaseModes: in-flight keys are decided under local, split (each
// region its share of max) and global (at the home, the lease id coming
// back through REGION.EXEC, and a release forwarded too); async refuses
// them with ErrLeaseMode, consuming nothing.
func TestLeaseModes(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "sp:* split as:* async gl:* global us"
	rs := startRegions(t, clock, regionSpec{name: "us", policy: pol}, regionSpec{name: "eu", policy: pol})
	acq := engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Burst: 4, Period: int64(time.Minute), Quantity: 1}
	for _, tc := range []struct {
		region, key string
		want        error
		admitted    int
	}{
		{"eu", "loc:1", nil, 4},
		{"eu", "sp:1", nil, 2}, // half of max 4
		{"eu", "gl:1", nil, 4}, // forwarded: the home decides
		{"us", "gl:1", nil, 0}, // the home's own requests find it full
		{"eu", "as:1", region.ErrLeaseMode, 0},
	} {
		got := 0
		for range 6 {
			res := rs[tc.region].limit(t, tc.key, acq)
			if !errors.Is(res.Err, tc.want) {
				t.Fatalf("%s: CC.ACQUIRE %s: err %v, want %v", tc.region, tc.key, res.Err, tc.want)
			}
			if res.Err == nil && !res.Results[0].Limited {
				got++
			}
		}
		if got != tc.admitted {
			t.Errorf("%s: CC.ACQUIRE %s admitted %d, want %d", tc.region, tc.key, got, tc.admitted)
		}
	}
	if _, ok := rs["eu"].store.Lookup([]byte("as:1"), clock.Now()); ok {
		t.Error("a refused async CC.ACQUIRE created the key")
	}
	// A lease taken through eu comes back with its id, lives at us, and
	// is released through eu.
	acq.Lease = "fwd-1"
	rel := engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseRelease, Lease: "fwd-1"}
	if res := rs["eu"].limit(t, "gl:2", acq); res.Err != nil || res.Results[0].Limited || res.Results[0].Lease != "fwd-1" {
		t.Fatalf("eu: CC.ACQUIRE gl:2 ... ID fwd-1 = %+v, want allowed with the lease", res)
	}
	if st, ok := rs["us"].store.Lookup([]byte("gl:2"), clock.Now()); !ok || len(st.Leases) != 1 {
		t.Fatalf("the home holds %+v for gl:2, want one lease", st)
	}
	if _, ok := rs["eu"].store.Lookup([]byte("gl:2"), clock.Now()); ok {
		t.Error("eu holds state for a key whose home is us")
	}
	for i, want := range []bool{false, true} { // released, then not held
		if res := rs["eu"].limit(t, "gl:2", rel); res.Err != nil || res.Results[0].Limited != want {
			t.Fatalf("eu: CC.RELEASE gl:2 fwd-1 #%d = %+v, want limited=%v", i+1, res, want)
		}
	}
	gen := engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Burst: 1, Period: int64(time.Minute), Quantity: 1}
	if res := rs["eu"].limit(t, "gl:3", gen); res.Err != nil || res.Results[0].Lease == "" {
		t.Fatalf("eu: CC.ACQUIRE gl:3 without ID = %+v, want the id the home made", res)
	}
}

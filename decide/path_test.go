package decide_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/limitpolicy"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// The rules every path of the test carries: an override for ov:*, one
// for sp:ov* (a split key whose override the gate then scales), one that
// makes a sliding log too large for sl-max-limit 100, and shadow sh:*.
func testRules(t *testing.T) decide.Rules {
	t.Helper()
	p := new(limitpolicy.Policy)
	p.SetOverrides([]limitpolicy.Override{
		{Pattern: "sp:ov*", Burst: 19, Rate: 1, Period: int64(time.Minute)},
		{Pattern: "ov:*", Burst: 0, Rate: 1, Period: int64(time.Minute)},
		{Pattern: "lg:*", Burst: 1000, Rate: 1, Period: int64(time.Minute)},
	})
	p.SetShadow([]string{"sh:*"})
	return decide.Rules{Policy: p, Parse: engine.ParseOptions{MaxLogLimit: 100}}
}

// testGate is region r1 of two equal regions, over inner: sp:* split
// (this region's share is half), everything else local. The peer is
// never dialled (no key is global).
func testGate(t *testing.T, inner decide.Backend) *region.Gate {
	t.Helper()
	pol, err := region.ParsePolicy([]string{"sp:*", "split"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := region.New(region.Config{Name: "r1", Peers: []region.PeerConfig{{Name: "r2", Addrs: []string{"127.0.0.1:1"}}},
		Timeout: time.Second, Policy: pol}, inner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// standalonePath is the path of a standalone server in a region: the
// rules, the gate, Local over a real keyspace.
func standalonePath(t *testing.T) *decide.Path {
	store, err := shards.New(shards.Config{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	local := decide.NewLocal(store, func() int64 { return time.Now().UnixNano() })
	return &decide.Path{Rules: testRules(t), Backend: testGate(t, local)}
}

// groupPath is the path of a one-node raft group in a region: the rules,
// the gate, the node, and the routing stage through the gate.
func groupPath(t *testing.T) *decide.Path {
	store, err := shards.New(shards.Config{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	cfg := replication.DefaultConfig()
	cfg.NodeID, cfg.Dir, cfg.RaftAddr, cfg.Bootstrap = "n0", t.TempDir(), "127.0.0.1:0", true
	cfg.RaftLogOutput, cfg.RaftLogLevel = io.Discard, "error"
	cfg.RespAddr = "127.0.0.1:1" // advertised only: nothing dials it here
	node, err := replication.NewNode(cfg, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	gate := testGate(t, node)
	p := &decide.Path{Rules: testRules(t), Backend: gate, Groups: decide.NewGroups(node, gate)}
	// The group serves once it has a leader and a routing table.
	poll.Until(t, 30*time.Second, func() error {
		if node.Routing() == nil {
			return errors.New("the node has no routing table yet")
		}
		_, err := node.ReadNow(context.Background())
		return err
	})
	return p
}

// decideOp runs op down p as a door does: the rules, then the group that
// serves its key (when p routes) or the Backend.
func decideOp(ctx context.Context, p *decide.Path, op shards.Op) (shards.Result, error) {
	if err := p.Rules.Apply(&op); err != nil {
		return shards.Result{}, err
	}
	res := make([]shards.Result, 1)
	var err error
	if p.Groups != nil {
		group, _, ok := p.Groups.Route(op.Keys[0])
		if !ok {
			return shards.Result{}, errors.New("no group serves the key")
		}
		err = p.Groups.WriteGroup(ctx, group, []shards.Op{op}, res)
	} else {
		err = p.Backend.Write(ctx, []shards.Op{op}, res)
	}
	if err == nil {
		err = res[0].Err
	}
	return res[0], err
}

// TestPath runs limiter requests down the whole path, standalone and in
// a group: the rules rewrite them (override, shadow) before the region
// gate scales a split key, and a request an override makes invalid is
// refused before anything is written.
func TestPath(t *testing.T) {
	gcra := func(key string, burst int64, code shards.OpCode) shards.Op {
		return shards.Op{Code: code, Keys: [][]byte{[]byte(key)},
			Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: burst, Rate: 1, Period: int64(time.Minute), Quantity: 1}}}
	}
	cases := []struct {
		name  string
		op    shards.Op
		times int // the op is decided this many times; the last is checked
		// what the last decision answers
		limited, shadowed bool
		limit             int64
		ruleErr           int // -1: no error; else RuleError.Limit
	}{
		{name: "no rule", op: gcra("k", 4, shards.OpLimit), times: 1, limit: 5, ruleErr: -1},
		{name: "override applied", op: gcra("ov:a", 99, shards.OpLimit), times: 2, limited: true, limit: 1, ruleErr: -1},
		{name: "override in an all-or-none op", op: gcra("ov:b", 99, shards.OpLimitAll), times: 2, limited: true, limit: 1, ruleErr: -1},
		{name: "shadow applied", op: gcra("sh:a", 0, shards.OpLimit), times: 2, shadowed: true, limit: 1, ruleErr: -1},
		{name: "region gate: split share", op: gcra("sp:a", 9, shards.OpLimit), times: 1, limit: 5, ruleErr: -1},
		{name: "override, then the gate's share", op: gcra("sp:ov", 3, shards.OpLimit), times: 1, limit: 10, ruleErr: -1},
		{name: "override refused", op: shards.Op{Code: shards.OpLimitAll, Keys: [][]byte{[]byte("ok"), []byte("lg:a")}, Reqs: []engine.Request{
			{Kind: engine.KindGCRA, Burst: 1, Rate: 1, Period: int64(time.Minute), Quantity: 1},
			{Kind: engine.KindSlidingLog, Burst: 10, Period: int64(time.Minute), Quantity: 1}}}, times: 1, ruleErr: 2},
	}
	for _, path := range []struct {
		name string
		new  func(*testing.T) *decide.Path
	}{{"standalone", standalonePath}, {"group", groupPath}} {
		t.Run(path.name, func(t *testing.T) {
			p := path.new(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var (
						res shards.Result
						err error
					)
					for range tc.times {
						op := tc.op
						op.Reqs = append([]engine.Request(nil), tc.op.Reqs...)
						res, err = decideOp(ctx, p, op)
					}
					if tc.ruleErr >= 0 {
						var re *decide.RuleError
						if !errors.As(err, &re) || re.Limit != tc.ruleErr {
							t.Fatalf("decide = %v, want a *RuleError of limit %d", err, tc.ruleErr)
						}
						now, _ := p.Backend.ReadNow(ctx)
						if n := p.Backend.Store().Exists(tc.op.Keys, now); n != 0 {
							t.Errorf("refused op wrote %d keys, want none", n)
						}
						return
					}
					if err != nil {
						t.Fatalf("decide: %v", err)
					}
					r := res.Results[0]
					if r.Limited != tc.limited || r.Shadowed != tc.shadowed || r.Limit != tc.limit {
						t.Errorf("last decision = limited %v shadowed %v limit %d, want %v %v %d",
							r.Limited, r.Shadowed, r.Limit, tc.limited, tc.shadowed, tc.limit)
					}
				})
			}
		})
	}
}

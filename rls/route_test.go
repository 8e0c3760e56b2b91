package rls

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/shards"
)

const unknown = pb.RateLimitResponse_UNKNOWN

// routeRules: u 3 an hour, t 1 an hour, s (shadow) 1 an hour, q (quota)
// 1 an hour.
const routeRules = `domain: g
descriptors:
  - key: u
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: t
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// fakeGroups is a Router over groups that each decide on a real keyspace
// of their own, standing in for the cluster's groups and the forwarding
// between them. A descriptor's group is the first letter of its value
// ("a7" is group a's), unless moved; view is this node's (possibly stale)
// picture of that. Each group refuses, as the FSM's slot check does, a key
// it does not own: cluster.ErrMoved, or cluster.ErrAsk when it migrates the
// key's slot to the importer and does not hold the key; the importer takes
// it only with Asking. Safe for concurrent use.
type fakeGroups struct {
	self  string
	clock *fakeClock

	mu        sync.Mutex
	stores    map[string]*shards.Store
	owner     map[string]string // key → owning group, overriding the value's letter
	view      map[string]string // key → the group Route names, overriding owner
	migrating map[string]string // key → group importing it from its owner
	down      map[string]error  // group → the error of every write there
	calls     map[string]int    // group → ops received
	staleFor  int               // Route answers view's stale group this many more times
}

func newFakeGroups(t *testing.T, self string, names ...string) *fakeGroups {
	t.Helper()
	f := &fakeGroups{self: self, clock: newFakeClock(), stores: map[string]*shards.Store{},
		owner: map[string]string{}, view: map[string]string{}, migrating: map[string]string{},
		down: map[string]error{}, calls: map[string]int{}}
	for _, n := range names {
		st, err := shards.New(shards.Config{Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		f.stores[n] = st
	}
	return f
}

// valueGroup is the group a key's value names: the letter after the last '_'.
func valueGroup(key []byte) string {
	k := string(key)
	return k[strings.LastIndexByte(k, '_')+1:][:1]
}

func (f *fakeGroups) ownerLocked(key []byte) string {
	if g, ok := f.owner[string(key)]; ok {
		return g
	}
	return valueGroup(key)
}

func (f *fakeGroups) Self() string { return f.self }

func (f *fakeGroups) Route(key []byte) (string, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.ownerLocked(key)
	if v, ok := f.view[string(key)]; ok {
		if f.staleFor == 0 {
			delete(f.view, string(key))
		} else {
			f.staleFor--
			g = v
		}
	}
	if g == "-" {
		return "", "", false
	}
	return g, f.migrating[string(key)], true
}

func (f *fakeGroups) WriteGroup(ctx context.Context, group string, ops []shards.Op, res []shards.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[group] += len(ops)
	if err := f.down[group]; err != nil {
		return err
	}
	st := f.stores[group]
	var run []shards.Op
	var at []int
	for i := range ops {
		if err := f.refuseLocked(group, st, &ops[i]); err != nil {
			res[i] = shards.Result{Err: err}
			continue
		}
		run = append(run, ops[i])
		at = append(at, i)
	}
	out := make([]shards.Result, len(run))
	if err := decide.NewLocal(st, f.clock.Now).Write(ctx, run, out); err != nil {
		return err
	}
	for j, i := range at {
		res[i] = out[j]
	}
	return nil
}

// refuseLocked is the fake's slot check of op in group.
func (f *fakeGroups) refuseLocked(group string, st *shards.Store, op *shards.Op) error {
	here, away := 0, 0
	for _, k := range op.Keys {
		owner, importer := f.ownerLocked(k), f.migrating[string(k)]
		switch {
		case owner != group && importer == group && op.Asking:
		case owner != group:
			return fmt.Errorf("%w: group %s", cluster.ErrMoved, group)
		case importer != "" && st.Exists([][]byte{k}, f.clock.Now()) == 0:
			away++
		default:
			here++
		}
	}
	switch {
	case away == 0:
		return nil
	case here == 0:
		return fmt.Errorf("%w: group %s", cluster.ErrAsk, group)
	}
	return fmt.Errorf("%w: group %s", cluster.ErrTryAgain, group)
}

// has reports whether group's keyspace holds the key of descriptor k=v.
func (f *fakeGroups) has(group, k, v string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stores[group].Exists([][]byte{[]byte("rls:gcra:g_" + k + "_" + v)}, f.clock.Now()) == 1
}

func newRouted(t *testing.T, f *fakeGroups) (*Service, func(...string) (*pb.RateLimitResponse, error)) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "g.yaml", routeRules)
	svc := New(Options{Router: f})
	if err := svc.Load(dir); err != nil {
		t.Fatal(err)
	}
	return svc, func(kv ...string) (*pb.RateLimitResponse, error) {
		var ds []*rlpb.RateLimitDescriptor
		for i := 0; i+1 < len(kv); i += 2 {
			ds = append(ds, desc(kv[i], kv[i+1]))
		}
		return svc.ShouldRateLimit(context.Background(), request("g", ds...))
	}
}

// TestRouteAcrossGroups: descriptors are decided in the group that owns
// their key, the enforced ones of one group atomically; across groups each
// group decides its own.
func TestRouteAcrossGroups(t *testing.T) {
	f := newFakeGroups(t, "a", "a", "b")
	svc, call := newRouted(t, f)
	for i := range 3 {
		r, err := call("u", "a1", "u", "b1")
		if err != nil || r.OverallCode != ok {
			t.Fatalf("call %d = %v, %v; want OK", i+1, r, err)
		}
	}
	if !f.has("a", "u", "a1") || f.has("b", "u", "a1") || !f.has("b", "u", "b1") || f.has("a", "u", "b1") {
		t.Fatal("keys did not land in their groups")
	}
	// Group a atomically: t over its limit, u not consumed.
	if r, err := call("u", "a2", "t", "a2"); err != nil || r.OverallCode != ok {
		t.Fatalf("first u,t of a = %v, %v", r, err)
	}
	r, err := call("u", "a2", "t", "a2")
	if err != nil || r.OverallCode != overLimit || r.Statuses[0].Code != ok || r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("second u,t of a = %v, %v; want OVER_LIMIT, u with 2 left (a peek)", r, err)
	}
	// Across groups: t of b refuses; u of a consumes in a.
	if r, err := call("u", "a3", "t", "b3"); err != nil || r.OverallCode != ok {
		t.Fatalf("first u of a, t of b = %v, %v", r, err)
	}
	r, err = call("u", "a3", "t", "b3")
	if err != nil || r.OverallCode != overLimit || r.Statuses[0].Code != ok || r.Statuses[0].LimitRemaining != 1 || r.Statuses[1].Code != overLimit {
		t.Fatalf("second u of a, t of b = %v, %v; want OVER_LIMIT, u decided in a (1 left)", r, err)
	}
	if got := svc.Stats().Forwarded; got != 5 {
		t.Errorf("Forwarded = %d, want 5 (the descriptors of group b)", got)
	}
}

// TestRouteMoved: a group that no longer owns a key refuses it; the service
// routes it again once this node's view follows, within maxRoutes attempts,
// else answers Unavailable.
func TestRouteMoved(t *testing.T) {
	f := newFakeGroups(t, "a", "a", "b")
	svc, call := newRouted(t, f)
	key := "rls:gcra:g_u_a9"
	f.owner[key], f.view[key], f.staleFor = "b", "a", 2 // moved to b; the view lags two looks
	if r, err := call("u", "a9"); err != nil || r.OverallCode != ok {
		t.Fatalf("moved key = %v, %v; want OK from b", r, err)
	}
	if !f.has("b", "u", "a9") || f.has("a", "u", "a9") {
		t.Fatal("moved key not decided in b alone")
	}
	if got := svc.Stats().Redirected; got != 2 {
		t.Errorf("Redirected = %d, want 2", got)
	}
	f.view[key], f.staleFor = "a", maxRoutes+5 // never catches up
	_, err := call("u", "a9")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "another group") {
		t.Fatalf("key refused on every route = %v; want Unavailable naming the refusal", err)
	}
	if got := f.calls["a"]; got != 2+maxRoutes {
		t.Errorf("group a asked %d times, want %d (bounded)", got, 2+maxRoutes)
	}
}

// TestRouteAsk: a key of a slot migrating from a to b that a does not hold
// is decided in b, asked with Asking; a request whose enforced descriptors
// of a are split by the migration is decided descriptor by descriptor.
func TestRouteAsk(t *testing.T) {
	f := newFakeGroups(t, "b", "a", "b")
	_, call := newRouted(t, f)
	moving, staying := "rls:gcra:g_u_a5", "rls:gcra:g_u_a6"
	if r, err := call("u", "a6"); err != nil || r.OverallCode != ok { // a6 exists in a
		t.Fatalf("u a6 = %v, %v", r, err)
	}
	f.migrating[moving], f.migrating[staying] = "b", "b"
	r, err := call("u", "a5", "u", "a6")
	if err != nil || r.OverallCode != ok {
		t.Fatalf("u a5 (away), u a6 (here) = %v, %v; want OK", r, err)
	}
	if !f.has("b", "u", "a5") || f.has("a", "u", "a5") || !f.has("a", "u", "a6") || f.has("b", "u", "a6") {
		t.Fatal("a5 must be decided in b (asked), a6 in a")
	}
	if got := r.Statuses[1].LimitRemaining; got != 1 {
		t.Errorf("a6 remaining = %d, want 1 (its second take)", got)
	}
}

// TestRouteUnreachable: a group that cannot decide (no leader) never turns
// into an OK: alone, or beside descriptors that allow, the call fails with
// its error; beside a descriptor that refuses, the reply is OVER_LIMIT with
// the undecided descriptor UNKNOWN; an undecided shadow descriptor is
// UNKNOWN and leaves the answer to the others.
func TestRouteUnreachable(t *testing.T) {
	f := newFakeGroups(t, "a", "a", "b")
	svc, call := newRouted(t, f)
	if r, err := call("t", "a1"); err != nil || r.OverallCode != ok {
		t.Fatalf("t a1 = %v, %v", r, err)
	}
	f.down["b"] = errors.New("no leader in b")
	tests := []struct {
		name string
		kv   []string
		code codes.Code // codes.OK: a reply
		want []pb.RateLimitResponse_Code
	}{
		{"alone", []string{"u", "b1"}, codes.Unavailable, nil},
		{"beside an allowing one", []string{"u", "a2", "u", "b1"}, codes.Unavailable, nil},
		{"beside a refusing one", []string{"t", "a1", "u", "b1"}, codes.OK, []pb.RateLimitResponse_Code{overLimit, unknown}},
		{"quota beside an allowing one", []string{"u", "a3", "q", "b1"}, codes.Unavailable, nil},
		{"shadow", []string{"u", "a4", "s", "b1"}, codes.OK, []pb.RateLimitResponse_Code{ok, unknown}},
	}
	for _, tt := range tests {
		r, err := call(tt.kv...)
		if status.Code(err) != tt.code {
			t.Errorf("%s: %v, %v; want code %v", tt.name, r, err, tt.code)
			continue
		}
		if tt.code != codes.OK {
			if !strings.Contains(err.Error(), "no leader in b") {
				t.Errorf("%s: %v; want the group's error", tt.name, err)
			}
			continue
		}
		want := overLimit
		if tt.want[0] == ok {
			want = ok
		}
		if r.OverallCode != want {
			t.Errorf("%s: overall %v, want %v", tt.name, r.OverallCode, want)
		}
		for i, c := range tt.want {
			if r.Statuses[i].Code != c {
				t.Errorf("%s: status %d = %v, want %v", tt.name, i, r.Statuses[i].Code, c)
			}
		}
	}
	if got := svc.Stats().Undecided; got != 5 {
		t.Errorf("Undecided = %d, want 5 (every descriptor of b)", got)
	}
	f.view["rls:gcra:g_u_a7"], f.staleFor = "-", 1 // a handover this node's view has not followed yet
	if r, err := call("u", "a7"); err != nil || r.OverallCode != ok {
		t.Errorf("slot without an owner for one look = %v, %v; want OK once the view follows", r, err)
	}
	f.owner["rls:gcra:g_u_c1"] = "-" // no group serves its slot
	if _, err := call("u", "c1"); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no group") {
		t.Errorf("unserved slot = %v; want Unavailable", err)
	}
}

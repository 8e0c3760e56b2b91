package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/cellserver/cellserver/internal/poll"
)

// rlsGroupRules: domain app, user=<any> 10 a day, team=<any> 2 a day,
// big=<any> 100 a day (so slow that nothing refills while a test runs).
const rlsGroupRules = `domain: app
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: team
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: big
    rate_limit: {unit: day, requests_per_unit: 100}
`

// rlsNode is one node's rate-limit port and a client of it.
type rlsNode struct {
	nd *clusterNode
	g  *group
	c  pb.RateLimitServiceClient
}

// startRLSGroups starts two groups of three with the rate-limit service on
// every node and returns the groups and every node's client.
func startRLSGroups(t *testing.T) ([]*group, []*rlsNode) {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rules, "app.yaml"), []byte(rlsGroupRules), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	groups := startGroupsEach(t, 2, func(id string) []string {
		p := freePort(t)
		ports[id] = p
		return []string{"--rls-port", strconv.Itoa(p), "--rls-config", rules}
	})
	var nodes []*rlsNode
	for _, g := range groups {
		for _, nd := range g.nodes {
			nodes = append(nodes, &rlsNode{nd: nd, g: g, c: rlsClient(t, ports[nd.id])})
		}
	}
	return groups, nodes
}

// rlsValues returns n values v (prefix0, prefix1, …) whose rate-limit key
// for descriptor key=v, rls:gcra:app_<key>_<v>, lies in g's slots.
func rlsValues(g *group, key, prefix string, n int) []string {
	var vs []string
	for i := 0; len(vs) < n; i++ {
		v := prefix + strconv.Itoa(i)
		if g.owns(keySlot(rlsKey(key, v))) {
			vs = append(vs, v)
		}
	}
	return vs
}

// rlsKey is the keyspace key of descriptor key=value in domain app (values
// without '_' or '%', which the key escapes).
func rlsKey(key, value string) string { return "rls:gcra:app_" + key + "_" + value }

// rlsCall asks c for domain app's descriptors given as key, value pairs
// (one entry each), within d.
func rlsCall(c pb.RateLimitServiceClient, d time.Duration, kv ...string) (*pb.RateLimitResponse, error) {
	req := &pb.RateLimitRequest{Domain: "app"}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Descriptors = append(req.Descriptors, &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: kv[i], Value: kv[i+1]}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.ShouldRateLimit(ctx, req, grpc.WaitForReady(true))
}

// TestRLSGroups: the rate-limit service on two groups of three answers for
// every descriptor through every node, as on one group.
func TestRLSGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	groups, nodes := startRLSGroups(t)
	t.Run("exactness", func(t *testing.T) { testRLSGroupsExactness(t, groups, nodes) })
	t.Run("one request, two groups", func(t *testing.T) { testRLSGroupsSplit(t, groups, nodes) })
	t.Run("slot moved", func(t *testing.T) { testRLSGroupsMove(t, groups, nodes) })
	t.Run("leader killed", func(t *testing.T) { testRLSGroupsFailover(t, groups, nodes) })
}

// One slot of group a moved to b by hand (as redis-cli --cluster does)
// while every node answers for descriptors of that slot: while it
// migrates, an exhausted key still in a stays refused, a new key is
// decided in b, a request over a key here and a key away is decided key by
// key; after MIGRATE and SETSLOT NODE, every node, before and after its
// view follows, continues the moved keys' counts exactly.
func testRLSGroupsMove(t *testing.T, groups []*group, nodes []*rlsNode) {
	a, b := groups[0], groups[1]
	al, bl := a.leader(t), b.leader(t)
	tag := ""
	for i := 0; tag == ""; i++ {
		if s := "{rm" + strconv.Itoa(i) + "}"; a.owns(keySlot(s)) {
			tag = s
		}
	}
	slot := keySlot(tag)
	ex, rem := tag+"ex", tag+"rem"
	call := func(n *rlsNode, kv ...string) *pb.RateLimitResponse {
		t.Helper()
		r, err := rlsCall(n.c, 30*time.Second, kv...)
		if err != nil {
			t.Fatalf("%v through %s (slot %d moving from a to b) = %v", kv, n.nd.id, slot, err)
		}
		return r
	}
	for range 2 {
		call(nodes[0], "team", ex)
	}
	left := uint32(99)
	if r := call(nodes[0], "big", rem); r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != left {
		t.Fatalf("big %s = %v; want OK, %d left", rem, r, left)
	}
	take := func(n *rlsNode, r *pb.RateLimitResponse, i int) {
		t.Helper()
		left--
		if st := r.Statuses[i]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != left {
			t.Errorf("big %s through %s = %v; want OK with %d left", rem, n.nd.id, st, left)
		}
	}

	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "IMPORTING", a.cid(al))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "MIGRATING", b.cid(bl))
	var fresh []string
	for _, n := range nodes {
		if r := call(n, "team", ex); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("exhausted team %s (in a, slot migrating) through %s = %v; want OVER_LIMIT", ex, n.nd.id, r)
		}
		v := tag + "new" + n.nd.id
		fresh = append(fresh, v)
		if r := call(n, "user", v); r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 9 {
			t.Errorf("new user %s (slot migrating) through %s = %v; want OK, 9 left", v, n.nd.id, r)
		}
		v2 := tag + "both" + n.nd.id
		fresh = append(fresh, v2)
		r := call(n, "big", rem, "user", v2)
		if r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[1].LimitRemaining != 9 {
			t.Errorf("big %s (in a) and user %s (new) through %s = %v; want OK", rem, v2, n.nd.id, r)
		}
		take(n, r, 0)
	}
	if got := groupKeys(t, a, "rls:gcra:app_user_"+tag+"new*"); len(got) != 0 {
		t.Errorf("new keys of the migrating slot in a: %v; want them in b", got)
	}

	ac := noRetryClient(t, al.Addr)
	for _, k := range []string{rlsKey("team", ex), rlsKey("big", rem)} {
		if err := ac.Do(ctxT(t), "MIGRATE", "127.0.0.1", bl.Port, "", 0, 5000, "KEYS", k).Err(); err != nil {
			t.Fatalf("MIGRATE … KEYS %s = %v", k, err)
		}
	}
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	for range 2 { // the first round races the nodes' views; the second follows them
		for _, n := range nodes {
			if r := call(n, "team", ex); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("exhausted team %s (moved to b) through %s = %v; want OVER_LIMIT", ex, n.nd.id, r)
			}
			take(n, call(n, "big", rem), 0)
		}
	}
	if got := groupKeys(t, a, "rls:gcra:app_*"+tag+"*"); len(got) != 0 {
		t.Errorf("keys of moved slot %d left in a: %v", slot, got)
	}
	if got := groupKeys(t, b, "rls:gcra:app_*"+tag+"*"); len(got) != 2+len(fresh) {
		t.Errorf("keys of moved slot %d in b: %v; want %d", slot, got, 2+len(fresh))
	}
}

// The 20 × 25 exactness test across groups: 20 goroutines send 25 calls
// each, every call through the next node of the six, over ten users (five
// per group) with a limit of 10 a day: 50 calls per user, exactly 10
// answered OK, the rest OVER_LIMIT, none an error.
func testRLSGroupsExactness(t *testing.T, groups []*group, nodes []*rlsNode) {
	const clients, calls, limit = 20, 25, 10
	users := append(rlsValues(groups[0], "user", "ex", 5), rlsValues(groups[1], "user", "ex", 5)...)
	allowed := make([]atomic.Int64, len(users))
	// Call latency through a node of the key's group and through one of
	// the other group (forwarded), for the log.
	var local, forwarded, nLocal, nForwarded atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for k := range clients {
		wg.Go(func() {
			for i := range calls {
				u, n := (k+i)%len(users), nodes[(k*calls+i)%len(nodes)]
				t0 := time.Now()
				r, err := rlsCall(n.c, 30*time.Second, "user", users[u])
				if n.g.owns(keySlot(rlsKey("user", users[u]))) {
					local.Add(int64(time.Since(t0)))
					nLocal.Add(1)
				} else {
					forwarded.Add(int64(time.Since(t0)))
					nForwarded.Add(1)
				}
				if err != nil {
					errs <- fmt.Errorf("user %s (group of slot %d) through %s: %w", users[u], keySlot(rlsKey("user", users[u])), n.nd.id, err)
					return
				}
				switch r.OverallCode {
				case pb.RateLimitResponse_OK:
					allowed[u].Add(1)
				case pb.RateLimitResponse_OVER_LIMIT:
				default:
					errs <- fmt.Errorf("user %s through %s: %v", users[u], n.nd.id, r)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if nLocal.Load() > 0 && nForwarded.Load() > 0 {
		t.Logf("mean call latency under %d concurrent clients: %v through a node of the key's group (%d calls), %v through a node of the other group (%d calls)",
			clients, time.Duration(local.Load()/nLocal.Load()), nLocal.Load(), time.Duration(forwarded.Load()/nForwarded.Load()), nForwarded.Load())
	}
	var keys []string
	for i, u := range users {
		keys = append(keys, rlsKey("user", u))
		if got := allowed[i].Load(); got != limit {
			t.Errorf("user %s (slot %d): %d of %d calls OK, want exactly %d", u, keySlot(keys[i]), got, clients*calls/len(users), limit)
		}
	}
	checkKeysLanded(t, groups, "rls:gcra:app_user_ex*", keys)
}

// One request's descriptors of one group are decided atomically in that
// group, through a node of the other: when one is over its limit, the other
// consumes nothing. Descriptors of two groups are decided per group: the
// request is OVER_LIMIT when one group's descriptor is, and the other
// group's descriptor consumed (each status tells).
func testRLSGroupsSplit(t *testing.T, groups []*group, nodes []*rlsNode) {
	a, b := groups[0], groups[1]
	var viaB, viaA *rlsNode
	for _, n := range nodes {
		if n.g == b && viaB == nil {
			viaB = n
		}
		if n.g == a && viaA == nil {
			viaA = n
		}
	}
	user, team := rlsValues(a, "user", "sp", 1)[0], rlsValues(a, "team", "sp", 1)[0]
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		r, err := rlsCall(viaB.c, 30*time.Second, "user", user, "team", team)
		if err != nil || r.OverallCode != want {
			t.Fatalf("call %d (user and team of group a) through %s = %v, %v; want %v", i+1, viaB.nd.id, r, err, want)
		}
		if i == 2 && (r.Statuses[0].Code != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 8 || r.Statuses[1].Code != pb.RateLimitResponse_OVER_LIMIT) {
			t.Fatalf("refused call = %v; want user OK with 8 left (not consumed), team OVER_LIMIT", r)
		}
	}

	userA, teamB := rlsValues(a, "user", "sq", 1)[0], rlsValues(b, "team", "sq", 1)[0]
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		via := []*rlsNode{viaA, viaB}[i%2]
		r, err := rlsCall(via.c, 30*time.Second, "user", userA, "team", teamB)
		if err != nil || r.OverallCode != want || len(r.Statuses) != 2 {
			t.Fatalf("call %d (user of a, team of b) through %s = %v, %v; want %v", i+1, via.nd.id, r, err, want)
		}
		if st := r.Statuses[0]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != uint32(9-i) {
			t.Fatalf("call %d: user status %v; want OK with %d left (decided in group a on its own)", i+1, st, 9-i)
		}
	}
}

// kill -9 of group a's leader: descriptors of group b keep answering
// through every live node; a descriptor of a never answers OK while it is
// exhausted (an error, or OVER_LIMIT, during the failover), nor does a
// request that holds it; once a has a new leader, a's descriptors answer
// again through every live node, and a fresh one admits at most its limit.
func testRLSGroupsFailover(t *testing.T, groups []*group, nodes []*rlsNode) {
	a, b := groups[0], groups[1]
	exhausted := rlsValues(a, "team", "fo", 1)[0]
	for range 2 {
		if r, err := rlsCall(nodes[0].c, 30*time.Second, "team", exhausted); err != nil || r.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("team %s before the kill = %v, %v; want OK", exhausted, r, err)
		}
	}
	fresh := rlsValues(a, "user", "fo", 1)[0]
	bUsers := rlsValues(b, "user", "fb", 400)
	var nextB atomic.Int64
	newB := func() string { return bUsers[int(nextB.Add(1)-1)%len(bUsers)] }

	old := a.leader(t)
	old.kill()
	killed := time.Now()
	var live []*rlsNode
	for _, n := range nodes {
		if n.nd != old {
			live = append(live, n)
		}
	}

	// Calls for a's descriptors have Envoy-like short deadlines, so that
	// the rounds see the window without a leader in a.
	const aDeadline = 250 * time.Millisecond
	var (
		mu       sync.Mutex
		failures []string
		freshOK  atomic.Int64
		aErrors  atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// One round: every live node at once asks b's descriptor alone, a's
	// exhausted one alone and with b's, and a's fresh one; it reports
	// whether a's descriptors were decided through every node.
	round := func() bool {
		var wg sync.WaitGroup
		var undecided atomic.Int64
		for _, n := range live {
			wg.Go(func() {
				u := newB()
				if r, err := rlsCall(n.c, 10*time.Second, "user", u); err != nil || r.OverallCode != pb.RateLimitResponse_OK {
					fail("%s: user %s of group b during a's failover = %v, %v; want OK", n.nd.id, u, r, err)
				}
			})
			wg.Go(func() {
				r, err := rlsCall(n.c, aDeadline, "team", exhausted)
				switch {
				case err != nil:
					undecided.Add(1)
					aErrors.Add(1)
				case r.OverallCode != pb.RateLimitResponse_OVER_LIMIT:
					fail("%s: exhausted team %s of group a = %v; want OVER_LIMIT or an error, never OK", n.nd.id, exhausted, r)
				}
			})
			wg.Go(func() {
				u := newB()
				r, err := rlsCall(n.c, aDeadline, "team", exhausted, "user", u)
				if err == nil && r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
					fail("%s: exhausted team %s of a with user %s of b = %v; want OVER_LIMIT or an error, never OK", n.nd.id, exhausted, u, r)
				}
			})
			wg.Go(func() {
				r, err := rlsCall(n.c, aDeadline, "user", fresh)
				switch {
				case err != nil:
					undecided.Add(1)
				case r.OverallCode == pb.RateLimitResponse_OK:
					freshOK.Add(1)
				}
			})
		}
		wg.Wait()
		return undecided.Load() == 0
	}
	poll.Until(t, 60*time.Second, func() error {
		if !round() {
			return fmt.Errorf("group a's descriptors not decided through every live node yet")
		}
		return nil
	})
	t.Logf("group a's descriptors answered through every live node %v after kill -9 of %s (%d calls failed meanwhile)", time.Since(killed), old.id, aErrors.Load())
	for range 3 {
		round()
	}
	for _, f := range failures {
		t.Error(f)
	}
	if aErrors.Load() == 0 {
		t.Errorf("no call for group a's exhausted descriptor failed: the rounds never saw a without a leader")
	}
	if got := freshOK.Load(); got < 1 || got > 10 {
		t.Errorf("fresh user %s of group a: %d calls OK across the failover, want 1 to 10 (its limit)", fresh, got)
	}
}

package test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/region"
)

// regionSet is several regions, each one standalone cellserver, every
// region reaching every other through its own linkProxy.
type regionSet struct {
	names []string
	srv   map[string]*server
	link  map[[2]string]*linkProxy // {from, to}
}

// startRegionSet starts one standalone region per name, in memory, with
// the given policy and extra directives; links delay each byte by delay one
// way.
func startRegionSet(t *testing.T, names []string, delay time.Duration, policy string, extra ...string) *regionSet {
	t.Helper()
	return startRegionSetEach(t, names, delay, policy, nil, extra...)
}

// startRegionSetEach is startRegionSet with, in addition, each region's
// own directives (each[name]).
func startRegionSetEach(t *testing.T, names []string, delay time.Duration, policy string, each map[string][]string, extra ...string) *regionSet {
	t.Helper()
	rs := &regionSet{names: names, srv: map[string]*server{}, link: map[[2]string]*linkProxy{}}
	for _, n := range names {
		rs.srv[n] = newServer(t, "--save", "")
	}
	for _, from := range names {
		args := []string{"--region", from, "--region-policy", policy}
		for _, to := range names {
			if to == from {
				continue
			}
			p := startLinkProxy(t, rs.srv[to].Addr, delay)
			rs.link[[2]string{from, to}] = p
			args = append(args, "--region-peer", to+" "+p.Addr())
		}
		rs.srv[from].args = append(append(append(rs.srv[from].args, args...), extra...), each[from]...)
	}
	for _, n := range names {
		rs.srv[n].start()
	}
	return rs
}

// regionThrottle runs CL.THROTTLE on c and returns the reply, or the error.
func regionThrottle(c *redis.Client, t *testing.T, key string, burst, rate, period int) ([]int64, error) {
	v, err := c.Do(ctxT(t), "CL.THROTTLE", key, burst, rate, period).Result()
	if err != nil {
		return nil, err
	}
	return ints(t, v), nil
}

// TestRegionsSplit: three regions, clients in every region on one split
// key: each region admits its share, the total never exceeds the limit.
func TestRegionsSplit(t *testing.T) {
	names := []string{"r1", "r2", "r3"}
	rs := startRegionSet(t, names, 20*time.Millisecond, "user:* split", "--region-weight", "r1 2")
	want := map[string]int64{"r1": 50, "r2": 25, "r3": 25} // limit 100, weights 2:1:1
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	got := map[string]*atomic.Int64{}
	for _, n := range names {
		// The goroutines get the counter and share themselves: got is
		// written on the next turns of this loop while they run.
		admitted, share := new(atomic.Int64), want[n]
		got[n] = admitted
		c := rs.srv[n].client(t, 2)
		for range 4 {
			wg.Go(func() {
				for range 50 {
					r, err := regionThrottle(c, t, "user:42", 99, 1, 3600)
					if err != nil {
						errs <- err
						return
					}
					if r[1] != share {
						errs <- fmt.Errorf("%s reports limit %d, want its share %d", n, r[1], share)
						return
					}
					if r[0] == 0 {
						admitted.Add(1)
						total.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, n := range names {
		if g := got[n].Load(); g != want[n] {
			t.Errorf("%s admitted %d, want its share %d", n, g, want[n])
		}
	}
	if total.Load() > 100 {
		t.Errorf("admitted %d across regions, more than the limit 100", total.Load())
	}
}

// TestRegionsGlobal: a global key is decided in its home only: clients in
// every region, through links of 20 ms one way, admit exactly the limit
// (50 clients × 200 requests); a request from another region costs about
// one round trip; with the link to the home cut, the key answers an error
// naming the home region, and works again once the link heals.
func TestRegionsGlobal(t *testing.T) {
	names := []string{"r1", "r2", "r3"}
	const delay = 20 * time.Millisecond
	rs := startRegionSet(t, names, delay, "api:* global r1")
	const clients, each, limit = 50, 200, 1000
	var admitted atomic.Int64
	var remoteMu sync.Mutex
	var remote []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	cl := map[string]*redis.Client{}
	for _, n := range names {
		cl[n] = redis.NewClient(&redis.Options{Addr: rs.srv[n].Addr, Protocol: 2, PoolSize: clients})
		t.Cleanup(func() { cl[n].Close() })
	}
	for i := range clients {
		n := names[i%len(names)]
		wg.Go(func() {
			for range each {
				start := time.Now()
				r, err := regionThrottle(cl[n], t, "api:key", limit-1, 1, 3600)
				if err != nil {
					errs <- fmt.Errorf("%s: %v", n, err)
					return
				}
				if n != "r1" {
					remoteMu.Lock()
					remote = append(remote, time.Since(start))
					remoteMu.Unlock()
				}
				if r[0] == 0 {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := admitted.Load(); got != limit {
		t.Errorf("admitted %d across three regions, want exactly the limit %d", got, limit)
	}
	slices.Sort(remote)
	median := remote[len(remote)/2]
	t.Logf("decision latency from a remote region: median %v, p99 %v (one round trip is %v)", median, remote[len(remote)*99/100], 2*delay)
	if median < 2*delay || median > 2*delay+250*time.Millisecond {
		t.Errorf("median latency from a remote region %v, want about one round trip (%v)", median, 2*delay)
	}
	for _, n := range names[1:] {
		if v, _ := cl[n].Exists(ctxT(t), "api:key").Result(); v != 0 {
			t.Errorf("region %s holds the global key", n)
		}
	}

	// The link r2 → r1 is cut: r2's requests answer an error naming r1.
	rs.link[[2]string{"r2", "r1"}].Cut()
	_, err := regionThrottle(cl["r2"], t, "api:other", 9, 1, 3600)
	if err == nil || !strings.Contains(err.Error(), "region r1 is unreachable") {
		t.Fatalf("with the home cut off: %v, want an error naming region r1", err)
	}
	st, err := cl["r2"].Do(ctxT(t), "REGION", "STATUS").StringSlice()
	if i := slices.Index(st, "region_peer_r1"); err != nil || i < 0 || i+1 >= len(st) || !strings.HasPrefix(st[i+1], "state=down") {
		t.Errorf("REGION STATUS with r1 cut off: %v %v, want r1 down", st, err)
	}
	if _, err := regionThrottle(cl["r3"], t, "api:other", 9, 1, 3600); err != nil {
		t.Errorf("r3, whose link is up, answered %v", err)
	}
	rs.link[[2]string{"r2", "r1"}].Heal()
	poll.Until(t, 10*time.Second, func() error {
		_, err := regionThrottle(cl["r2"], t, "api:other", 9, 1, 3600)
		return err
	})
	info, err := cl["r2"].Info(ctxT(t), "regions").Result()
	if f := parseInfo(info); err != nil || f["region"] != "r2" || !strings.HasPrefix(f["region_peer_r1"], "state=up") {
		t.Errorf("INFO regions after healing: %q %v", info, err)
	}
}

// TestRegionsUnreachableModes: region-unreachable local decides the key
// alone, deny refuses it; neither is silent in REGION STATUS.
func TestRegionsUnreachableModes(t *testing.T) {
	for _, mode := range []string{"local", "deny"} {
		t.Run(mode, func(t *testing.T) {
			rs := startRegionSet(t, []string{"r1", "r2"}, 0, "api:* global r1", "--region-unreachable", mode)
			rs.link[[2]string{"r2", "r1"}].Cut()
			c := rs.srv["r2"].client(t, 2)
			r, err := regionThrottle(c, t, "api:k", 9, 1, 3600)
			if err != nil {
				t.Fatal(err)
			}
			exists, _ := c.Exists(ctxT(t), "api:k").Result()
			switch mode {
			case "local":
				if r[0] != 0 || r[1] != 10 || exists != 1 {
					t.Errorf("reply %v, key exists %d; want decided here with the whole limit", r, exists)
				}
			case "deny":
				if r[0] != 1 || exists != 0 {
					t.Errorf("reply %v, key exists %d; want refused, nothing stored", r, exists)
				}
			}
			info, _ := c.Info(ctxT(t), "regions").Result()
			if f := parseInfo(info); f["region_fallbacks"] != "1" {
				t.Errorf("INFO regions %q, want one fallback", info)
			}
		})
	}
}

// TestRegionsBadPeers: REGION.EXEC naming a wrong target, an unknown
// origin, or malformed, is refused with a clear log line and applies
// nothing; a wrong password is refused by AUTH.
func TestRegionsBadPeers(t *testing.T) {
	s := startServer(t, "--save", "", "--region", "r1", "--region-peer", "r2 127.0.0.1:1", "--requirepass", "pw")
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, Password: "pw"})
	t.Cleanup(func() { c.Close() })
	req := []any{"k", "gcra", 9, 1, int64(time.Hour), 1, 0}
	calls := []struct {
		args []any
		want string
	}{
		{append([]any{"REGION.EXEC", "r2", "r9", "ONE"}, req...), "wrong region name"},
		{append([]any{"REGION.EXEC", "mars", "r1", "ONE"}, req...), "unknown origin region"},
		{[]any{"REGION.EXEC", "r2", "r1", "ONE", "k", "gcra", 9, 0, int64(time.Hour), 1, 0}, "malformed peer operation"},
		{[]any{"REGION.EXEC", "r2", "r1", "SOME", "k", "gcra", 9, 1, int64(time.Hour), 1, 0}, "malformed peer operation"},
	}
	for _, call := range calls {
		err := c.Do(ctxT(t), call.args...).Err()
		if err == nil || !strings.Contains(err.Error(), call.want) {
			t.Errorf("%v = %v, want an error with %q", call.args, err, call.want)
		}
	}
	if n, _ := c.Exists(ctxT(t), "k").Result(); n != 0 {
		t.Error("a refused peer call was applied")
	}
	poll.Until(t, 5*time.Second, func() error {
		if n := strings.Count(s.output.String(), "refused a region peer's call"); n < len(calls) {
			return fmt.Errorf("%d log lines of refused calls, want %d:\n%s", n, len(calls), s.output)
		}
		return nil
	})
	// A peer's call with the right names applies.
	v, err := c.Do(ctxT(t), append([]any{"REGION.EXEC", "r2", "r1", "ONE"}, req...)...).Result()
	if err != nil {
		t.Fatalf("a good peer call: %v", err)
	}
	if arr, ok := v.([]any); !ok || len(arr) != 1 {
		t.Fatalf("reply %#v, want one result", v)
	}
	// A batch of async consumption: applied once; the same batch again is
	// a duplicate; a malformed one (a key of another slot) is refused.
	slot := strconv.Itoa(keySlot("c:1"))
	stream := "00ab-" + strconv.FormatInt(time.Now().UnixNano()/int64(region.StreamEra), 10)
	batch := []any{"REGION.APPLY", "r2", "r1", stream, slot, 1, "c:1", "fixed-window", 100, 0, int64(time.Hour), 7, 0}
	for i, want := range []string{"OK", "DUP"} {
		if v, err := c.Do(ctxT(t), batch...).Result(); err != nil || v != want {
			t.Errorf("batch, delivery %d: %v %v, want %s", i+1, v, err, want)
		}
	}
	if v, err := c.Do(ctxT(t), "FW.INCR", "c:1", 100, 3600, 0).Result(); err != nil || ints(t, v)[2] != 93 {
		t.Errorf("after a batch delivered twice: %v %v, want 7 consumed (93 remaining)", v, err)
	}
	malformed := slices.Clone(batch)
	malformed[6] = "c:2"
	if err := c.Do(ctxT(t), malformed...).Err(); err == nil || !strings.Contains(err.Error(), "malformed peer operation") {
		t.Errorf("a batch with a key of another slot: %v, want refused", err)
	}
	if n, _ := c.Exists(ctxT(t), "c:2").Result(); n != 0 {
		t.Error("a refused batch was applied")
	}
	// A wrong password never reaches the command.
	bad := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, Password: "nope"})
	t.Cleanup(func() { bad.Close() })
	err = bad.Do(ctxT(t), append([]any{"REGION.EXEC", "r2", "r1", "ONE"}, req...)...).Err()
	if err == nil || !(strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH")) || errors.Is(err, redis.Nil) {
		t.Errorf("with a wrong password: %v, want WRONGPASS", err)
	}
	// CONFIG SET region-policy is live and checked.
	if err := c.ConfigSet(ctxT(t), "region-policy", "api:* global mars").Err(); err == nil {
		t.Error("CONFIG SET accepted a home that is no region")
	}
	if err := c.ConfigSet(ctxT(t), "region-policy", "api:* global r2 user:* split").Err(); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.ConfigGet(ctxT(t), "region-policy").Result(); v["region-policy"] != "api:* global r2 user:* split" {
		t.Errorf("CONFIG GET region-policy = %v", v)
	}
}

// TestRegionsEnvoy: the Envoy rate-limit service takes part: with every
// key global to r1, descriptors decided through either region's service
// share one limit.
func TestRegionsEnvoy(t *testing.T) {
	names := []string{"r1", "r2"}
	rules := t.TempDir()
	rlsRules(t, rules, 4)
	ports := map[string]int{}
	rs := &regionSet{names: names, srv: map[string]*server{}, link: map[[2]string]*linkProxy{}}
	for _, n := range names {
		ports[n] = freePort(t)
		rs.srv[n] = newServer(t, "--save", "", "--rls-port", strconv.Itoa(ports[n]), "--rls-config", rules)
	}
	for _, from := range names {
		args := []string{"--region", from, "--region-policy", "* global r1"}
		for _, to := range names {
			if to != from {
				p := startLinkProxy(t, rs.srv[to].Addr, 5*time.Millisecond)
				args = append(args, "--region-peer", to+" "+p.Addr())
			}
		}
		rs.srv[from].args = append(rs.srv[from].args, args...)
		rs.srv[from].start()
	}
	ok := 0
	for i := range 8 {
		n := names[i%2]
		r := shouldRateLimit(t, rlsClient(t, ports[n]), "alice")
		if r.OverallCode.String() == "OK" {
			ok++
		}
	}
	if ok != 4 {
		t.Errorf("%d descriptors allowed through two regions' services, want the limit 4", ok)
	}
	if n, _ := rs.srv["r2"].client(t, 2).DBSize(ctxT(t)).Result(); n != 0 {
		t.Errorf("r2 holds %d keys; every key's home is r1", n)
	}
}

// TestRegionsTLS: with tls-replication the links between regions are
// mutual TLS: global keys work through the peers' TLS ports, and a peer
// reached on its plaintext port is unreachable.
func TestRegionsTLS(t *testing.T) {
	p := newTestPKI(t)
	tlsArgs := []string{"--tls-replication", "yes", "--tls-cert-file", p.NodeCert, "--tls-key-file", p.NodeKey, "--tls-ca-cert-file", p.CAFile}
	tlsPort := map[string]int{"r1": freePort(t), "r2": freePort(t)}
	srv := map[string]*server{}
	for _, n := range []string{"r1", "r2"} {
		srv[n] = newServer(t, append([]string{"--save", "", "--tls-port", strconv.Itoa(tlsPort[n])}, tlsArgs...)...)
	}
	srv["r1"].args = append(srv["r1"].args, "--region", "r1", "--region-policy", "g:* global r1",
		"--region-peer", "r2 127.0.0.1:"+strconv.Itoa(tlsPort["r2"]))
	srv["r2"].args = append(srv["r2"].args, "--region", "r2", "--region-policy", "g:* global r1 p:* global r3",
		"--region-peer", "r1 127.0.0.1:"+strconv.Itoa(tlsPort["r1"]),
		"--region-peer", "r3 "+srv["r1"].Addr) // r1's plaintext port, named r3
	for _, n := range []string{"r1", "r2"} {
		srv[n].start()
	}
	c := srv["r2"].client(t, 2)
	allowed := 0
	for range 5 {
		r, err := regionThrottle(c, t, "g:k", 2, 1, 3600)
		if err != nil {
			t.Fatalf("over TLS: %v", err)
		}
		if r[0] == 0 {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("%d allowed through r1 over TLS, want 3", allowed)
	}
	if _, err := regionThrottle(c, t, "p:k", 2, 1, 3600); err == nil || !strings.Contains(err.Error(), "region r3 is unreachable") {
		t.Errorf("a TLS link to a plaintext port: %v, want unreachable", err)
	}
}

// Certificate rotation reaches the links to peer regions: both regions'
// files are replaced by a new CA's and reloaded (SIGHUP), then r1 restarts
// (reading only the new files) and r2's next link to it, dialled afresh,
// must present and trust the new certificates: a global key homed in r1
// answers through r2 again. Before, r2's links kept the old CA and found
// r1 unreachable.
func TestRegionsTLSRotation(t *testing.T) {
	files := newRotatingNodeFiles(t)
	tlsPort := map[string]int{"r1": freePort(t), "r2": freePort(t)}
	srv := map[string]*server{}
	for _, n := range []string{"r1", "r2"} {
		srv[n] = newServer(t, append([]string{"--save", "", "--tls-port", strconv.Itoa(tlsPort[n])}, files.args()...)...)
	}
	srv["r1"].args = append(srv["r1"].args, "--region", "r1", "--region-policy", "g:* global r1",
		"--region-peer", "r2 127.0.0.1:"+strconv.Itoa(tlsPort["r2"]))
	srv["r2"].args = append(srv["r2"].args, "--region", "r2", "--region-policy", "g:* global r1",
		"--region-peer", "r1 127.0.0.1:"+strconv.Itoa(tlsPort["r1"]))
	for _, n := range []string{"r1", "r2"} {
		srv[n].start()
	}
	c := srv["r2"].client(t, 2)
	if _, err := regionThrottle(c, t, "g:before", 9, 1, 3600); err != nil {
		t.Fatalf("over TLS before the rotation: %v", err)
	}
	files.rotate(t)
	for _, n := range []string{"r1", "r2"} {
		reloadCerts(t, srv[n])
	}
	srv["r1"].kill()
	srv["r1"].start()
	poll.Until(t, 30*time.Second, func() error {
		r, err := regionThrottle(c, t, "g:after", 9, 1, 3600)
		if err != nil || r[0] != 0 {
			return fmt.Errorf("a global key through r2 after the rotation: %v, %v", r, err)
		}
		return nil
	})
}

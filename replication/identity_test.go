package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
	"github.com/cellserver/cellserver/shards"
)

// restartWith starts stopped node i again on its directory with extra
// settings on top of the cluster's; the raft address is the node's last
// one unless extra sets another.
func (c *testCluster) restartWith(i int, extra func(*Config)) {
	c.t.Helper()
	base := c.tweak
	c.tweak = func(cfg *Config) {
		if base != nil {
			base(cfg)
		}
		extra(cfg)
	}
	defer func() { c.tweak = base }()
	c.restart(i)
}

// memberAddr is the raft address node n's configuration lists for id ("" if
// none).
func memberAddr(t testing.TB, n *Node, id string) string {
	t.Helper()
	servers, _, err := n.mship.configuration()
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	if i := serverIndex(servers, id); i >= 0 {
		return string(servers[i].Address)
	}
	return ""
}

// waitListed polls until every running node lists id at addr as a voter
// and node id follows a leader.
func (c *testCluster) waitListed(id, addr string, timeout time.Duration) {
	c.t.Helper()
	poll.Until(c.t, timeout, func() error {
		for _, tn := range c.nodes {
			if tn.node == nil {
				continue
			}
			if got := memberAddr(c.t, tn.node, id); got != addr {
				return fmt.Errorf("%s lists %s at %q, want %q", tn.id, id, got, addr)
			}
			vs, _ := voters(c.t, tn.node)
			if !contains(vs, id) {
				return fmt.Errorf("%s: %s is not a voter (voters %v)", tn.id, id, vs)
			}
			if tn.id == id && tn.node.Info().LeaderID == "" {
				return fmt.Errorf("%s knows no leader", id)
			}
		}
		return nil
	})
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Every member in turn, the leader included, restarts from its directory
// at a new raft address: the group records the new address by itself, the
// member keeps its vote, and a key exhausted before stays exhausted.
func TestRestartAtNewAddress(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	if r, err := write(t, c.nodes[l].node, throttle("id:1", 0, 1, 3600, 1)); err != nil || r.Limited {
		t.Fatalf("first write = %+v, %v; want allowed", r, err)
	}
	c.waitConverged(10 * time.Second)
	for i := range c.nodes {
		tn := c.nodes[i]
		old := tn.raftAddr
		c.stop(i)
		tn.raftAddr = "127.0.0.1:0" // a new port: a new address
		c.restart(i)
		if tn.raftAddr == old {
			t.Fatalf("%s restarted at its old address %s", tn.id, old)
		}
		c.waitListed(tn.id, tn.raftAddr, 15*time.Second)
		if !strings.Contains(tn.logs.String(), "raft address changed since the configuration was written") {
			t.Errorf("%s did not log that its address changed:\n%s", tn.id, tn.logs)
		}
		c.waitConverged(15 * time.Second)
		l = c.WaitForLeader(10 * time.Second)
		if r, err := write(t, c.nodes[l].node, throttle("id:1", 0, 1, 3600, 1)); err != nil || !r.Limited {
			t.Fatalf("after moving %s: write = %+v, %v; want limited (exhausted before)", tn.id, r, err)
		}
	}
	moved := 0
	for _, tn := range c.nodes {
		moved += strings.Count(tn.logs.String(), "a member's raft address changed")
	}
	if moved < len(c.nodes) {
		t.Errorf("leaders logged %d address changes, want at least %d", moved, len(c.nodes))
	}
}

// A group of one restarted at a new address records it itself.
func TestSingleNodeRestartAtNewAddress(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	tn := c.nodes[0]
	c.stop(0)
	old := tn.raftAddr
	tn.raftAddr = "127.0.0.1:0"
	c.restart(0)
	if tn.raftAddr == old {
		t.Fatalf("restarted at its old address %s", old)
	}
	c.waitListed(tn.id, tn.raftAddr, 15*time.Second)
	if r, err := write(t, tn.node, throttle("one", 0, 1, 60, 1)); err != nil || r.Limited {
		t.Fatalf("write after the move = %+v, %v; want allowed", r, err)
	}
}

// fakeDNS is an injected Resolver: names map to IP addresses that a test
// changes, and every lookup is counted.
type fakeDNS struct {
	mu      sync.Mutex
	hosts   map[string]string
	lookups map[string]int
}

func (d *fakeDNS) set(name, ip string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hosts[name] = ip
}

func (d *fakeDNS) resolve(_ context.Context, host string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups[host]++
	ip, ok := d.hosts[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return []string{ip}, nil
}

func (d *fakeDNS) drop(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.hosts, name)
}

func (d *fakeDNS) count(host string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookups[host]
}

// An advertised host name stays a name in the configuration and is
// resolved at every dial: a member that comes back at another IP behind
// the same name is followed without any configuration change.
func TestAdvertisedNamesResolvedAtDial(t *testing.T) {
	dns := &fakeDNS{hosts: map[string]string{}, lookups: map[string]int{}}
	ports := map[string]int{}
	bind := map[string]string{} // node id → IP it listens on
	var mu sync.Mutex
	for i := range 3 {
		id := "n" + strconv.Itoa(i)
		ports[id] = freeTCPPort(t)
		bind[id] = "127.0.0.1"
		dns.set(id+".cell.test", "127.0.0.1")
	}
	c := newTestCluster(t, 3, func(cfg *Config) {
		mu.Lock()
		defer mu.Unlock()
		port := strconv.Itoa(ports[cfg.NodeID])
		cfg.RaftAddr = net.JoinHostPort(bind[cfg.NodeID], port)
		cfg.RaftAdvertise = cfg.NodeID + ".cell.test:" + port
		cfg.Resolver = dns.resolve
	})
	l := c.WaitForLeader(10 * time.Second)
	for _, tn := range c.nodes {
		for _, m := range tn.node.Info().Members {
			if want := m.ID + ".cell.test:" + strconv.Itoa(ports[m.ID]); m.RaftAddr != want {
				t.Fatalf("%s lists %s at %q, want the name %q", tn.id, m.ID, m.RaftAddr, want)
			}
		}
	}
	if r, err := write(t, c.nodes[l].node, throttle("dns:1", 0, 1, 3600, 1)); err != nil || r.Limited {
		t.Fatalf("first write = %+v, %v; want allowed", r, err)
	}
	// Move a follower to another loopback IP behind its name.
	f := c.followers(l)[0]
	tn := c.nodes[f]
	name := tn.id + ".cell.test"
	_, index, err := c.nodes[l].node.mship.configuration()
	if err != nil {
		t.Fatal(err)
	}
	c.stop(f)
	// While the name resolves to nothing, the leader says so.
	dns.drop(name)
	poll.Until(t, 15*time.Second, func() error {
		if want := "cannot reach a member's raft address " + name; !strings.Contains(c.nodes[l].logs.String(), want) {
			return fmt.Errorf("the leader has not logged %q", want)
		}
		return nil
	})
	mu.Lock()
	bind[tn.id] = "127.0.0.2"
	mu.Unlock()
	dns.set(name, "127.0.0.2")
	before := dns.count(name)
	c.restart(f)
	c.waitConverged(15 * time.Second)
	if got := dns.count(name); got <= before {
		t.Errorf("lookups of %s after the move = %d, want more than %d (resolved at dial time)", name, got, before)
	}
	if _, after, err := c.nodes[l].node.mship.configuration(); err != nil || after != index {
		t.Errorf("configuration index = %d, %v; want %d (a name needs no configuration change)", after, err, index)
	}
	l = c.WaitForLeader(10 * time.Second)
	if r, err := write(t, c.nodes[l].node, throttle("dns:1", 0, 1, 3600, 1)); err != nil || !r.Limited {
		t.Fatalf("write after the move = %+v, %v; want limited", r, err)
	}
	c.waitConverged(15 * time.Second)
	if got, want := c.nodes[f].node.fsm.LastIndex(), c.nodes[l].node.fsm.LastIndex(); got != want {
		t.Fatalf("moved follower applied %d, leader %d", got, want)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startLoneNode starts a node outside any test cluster (no RESP listener).
func startLoneNode(t *testing.T, cfg Config) (*Node, *testlog.Buffer) {
	t.Helper()
	store, err := shards.New(shards.Config{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	n, err := NewNode(cfg, store, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("NewNode(%s): %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n, logs
}

// A node that switches from advertising its IP address to advertising a
// name for it is moved, although it still answers at the old address: it
// is the same process.
func TestMoveFromAddressToName(t *testing.T) {
	dns := &fakeDNS{hosts: map[string]string{"n1.cell.test": "127.0.0.1"}, lookups: map[string]int{}}
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Resolver = dns.resolve })
	l := c.WaitForLeader(10 * time.Second)
	f := c.followers(l)[0]
	tn := c.nodes[f]
	_, port, err := net.SplitHostPort(tn.raftAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.stop(f)
	name := "n1.cell.test:" + port
	c.restartWith(f, func(cfg *Config) { cfg.RaftAdvertise = name })
	c.waitListed(tn.id, name, 15*time.Second)
	if dns.count("n1.cell.test") == 0 {
		t.Errorf("the name was never resolved")
	}
}

// A claim to be a member at a new address changes nothing unless the
// leader's own checks confirm it: the node there must pass the handshake
// (prove the cluster secret), answer as that member with raft state, and
// the member must not answer at its recorded address any more.
func TestMoveNeedsProof(t *testing.T) {
	t.Run("without the cluster secret", func(t *testing.T) {
		c := newTestCluster(t, 3, func(cfg *Config) { cfg.ClusterSecret = "s3cret" })
		l := c.WaitForLeader(10 * time.Second)
		f := c.followers(l)[0]
		tn := c.nodes[f]
		old := tn.raftAddr
		c.stop(f)
		// The member's own directory (its raft state), at a new address,
		// without the secret, asking through a member's RESP port too.
		cfg := testConfig(tn.id, tn.dir, "127.0.0.1:1")
		cfg.ClusterSecret = "guess"
		cfg.Join = c.nodes[l].respAddr
		impostor, logs := startLoneNode(t, cfg)
		poll.Until(t, 20*time.Second, func() error {
			if !strings.Contains(c.nodes[l].logs.String(), "refused to move a member to a new raft address") {
				return errors.New("the leader has not refused the move yet")
			}
			if !strings.Contains(logs.String(), "cannot record this node's new raft address yet") {
				return errors.New("the impostor has not logged its failure")
			}
			return nil
		})
		for _, i := range []int{l, 3 - l - f} {
			if got := memberAddr(t, c.nodes[i].node, tn.id); got != old {
				t.Fatalf("%s lists %s at %s, want its old address %s", c.nodes[i].id, tn.id, got, old)
			}
		}
		if err := impostor.Close(); err != nil {
			t.Fatal(err)
		}
		// The member itself, with the secret, at a new address: moved.
		tn.raftAddr = "127.0.0.1:0"
		c.restart(f)
		c.waitListed(tn.id, tn.raftAddr, 15*time.Second)
	})

	t.Run("without a secret", func(t *testing.T) {
		c := newTestCluster(t, 3, nil)
		l := c.WaitForLeader(10 * time.Second)
		live := c.nodes[(l+1)%3]
		// A node with raft state (a cluster of its own) claiming a live
		// member's id.
		cfg := testConfig(live.id, t.TempDir(), "127.0.0.1:1")
		cfg.Bootstrap = true
		other, _ := startLoneNode(t, cfg)
		poll.Until(t, 10*time.Second, func() error {
			if other.raft.LastIndex() == 0 {
				return errors.New("no raft state yet")
			}
			return nil
		})
		// A wiped node claiming a stopped member's id.
		dead := c.nodes[(l+2)%3]
		c.stop((l + 2) % 3)
		wiped, _ := startLoneNode(t, testConfig(dead.id, t.TempDir(), "127.0.0.1:1"))
		for _, tt := range []struct {
			name, id, addr, want string
		}{
			{"live member", live.id, other.RaftAddr(), "still answers"},
			{"no raft state", dead.id, wiped.RaftAddr(), "has no raft state"},
			{"unreachable", dead.id, zombie(t), "does not answer"},
		} {
			old := memberAddr(t, c.nodes[l].node, tt.id)
			err := c.nodes[l].node.Members().Join(t.Context(), tt.id, tt.addr, "127.0.0.1:1")
			if !errors.Is(err, ErrIDInUse) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: Join(%s at %s) = %v, want ErrIDInUse (%q)", tt.name, tt.id, tt.addr, err, tt.want)
			}
			if got := memberAddr(t, c.nodes[l].node, tt.id); got != old {
				t.Errorf("%s: the leader lists %s at %s, want %s", tt.name, tt.id, got, old)
			}
		}
	})
}

// The dialer resolves a name at every dial and tries its addresses in
// order; an IP literal is dialed as is.
func TestDialerResolvesAtEveryDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	closed := freeTCPPort(t) // nothing listens there
	var mu sync.Mutex
	answers := map[string][]string{
		"up":      {"127.0.0.1"},
		"second":  {"127.0.0.3", "127.0.0.1"}, // the first refuses
		"nothing": nil,
	}
	var lookups []string
	resolve := func(_ context.Context, host string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups = append(lookups, host)
		a, ok := answers[host]
		if !ok {
			return nil, fmt.Errorf("no such host %s", host)
		}
		return a, nil
	}
	d := newDialer(resolve, slog.New(slog.DiscardHandler))
	for _, tt := range []struct {
		addr    string
		ok      bool
		lookups []string
		errHas  string
	}{
		{"127.0.0.1:" + port, true, nil, ""},
		{"up:" + port, true, []string{"up"}, ""},
		{"up:" + port, true, []string{"up"}, ""}, // again: resolved again
		{"second:" + port, true, []string{"second"}, ""},
		{"nothing:" + port, false, []string{"nothing"}, "resolve nothing: no addresses"},
		{"unknown:" + port, false, []string{"unknown"}, "no such host unknown"},
		{"up:" + strconv.Itoa(closed), false, []string{"up"}, "up:" + strconv.Itoa(closed) + " (resolved to 127.0.0.1:" + strconv.Itoa(closed) + ")"},
	} {
		mu.Lock()
		lookups = nil
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := d.dial(ctx, tt.addr)
		cancel()
		if c != nil {
			c.Close()
		}
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), tt.errHas)) {
			t.Errorf("dial(%s) = %v, want ok %v (error containing %q)", tt.addr, err, tt.ok, tt.errHas)
		}
		mu.Lock()
		if fmt.Sprint(lookups) != fmt.Sprint(tt.lookups) {
			t.Errorf("dial(%s) looked up %v, want %v", tt.addr, lookups, tt.lookups)
		}
		mu.Unlock()
	}
}

// A member that was down while every other member moved knows none of
// their addresses: restarted at a new address itself, it finds the leader
// through its Join peers and is moved there.
func TestRestartWithStaleConfiguration(t *testing.T) {
	c := newTestCluster(t, 5, nil)
	const late = 4
	c.stop(late)
	for i := range late {
		tn := c.nodes[i]
		c.stop(i)
		tn.raftAddr = "127.0.0.1:0"
		c.restart(i)
		c.waitListed(tn.id, tn.raftAddr, 15*time.Second)
	}
	tn := c.nodes[late]
	tn.raftAddr = "127.0.0.1:0"
	c.restartWith(late, func(cfg *Config) { cfg.Join = c.nodes[1].respAddr })
	c.waitListed(tn.id, tn.raftAddr, 20*time.Second)
	poll.Until(t, 10*time.Second, func() error {
		if logs := tn.logs.String(); !strings.Contains(logs, "the configuration lists this node at its new raft address") {
			return fmt.Errorf("%s did not log its move:\n%s", tn.id, logs)
		}
		return nil
	})
	c.waitConverged(15 * time.Second)
}

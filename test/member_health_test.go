package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// memberView is what a leader's views say of one member.
type memberView struct {
	infoState, infoOffset string // INFO replication slave<i>'s state= and offset=
	infoLag               int    // its lag= (seconds since the member last answered)
	connected             int    // INFO replication connected_slaves
	connectedIdx          bool   // its slave<i> has i < connected_slaves
	shardHealth           string // CLUSTER SHARDS health
	nodeFlags, nodeLink   string // CLUSTER NODES flags and link-state
	reachable, health     string // RAFT.INFO reachable= and health=
}

// viewOf reads what leader l's INFO replication, CLUSTER SHARDS, CLUSTER
// NODES and RAFT.INFO say of member m (group "default").
func viewOf(l, m *clusterNode) (memberView, error) {
	var v memberView
	c := redis.NewClient(&redis.Options{Addr: l.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return v, fmt.Errorf("INFO replication: %v", err)
	}
	info := parseInfo(text)
	v.connected, _ = strconv.Atoi(info["connected_slaves"])
	found := false
	for k, line := range info {
		idx, err := strconv.Atoi(strings.TrimPrefix(k, "slave"))
		if !strings.HasPrefix(k, "slave") || err != nil || !strings.Contains(line, ",port="+strconv.Itoa(m.Port)+",") {
			continue
		}
		found = true
		v.connectedIdx = idx < v.connected
		for _, kv := range strings.Split(line, ",") {
			key, val, _ := strings.Cut(kv, "=")
			switch key {
			case "state":
				v.infoState = val
			case "offset":
				v.infoOffset = val
			case "lag":
				v.infoLag, _ = strconv.Atoi(val)
			}
		}
	}
	if !found {
		return v, fmt.Errorf("INFO replication names no slave at port %d:\n%s", m.Port, text)
	}
	if v.shardHealth, v.nodeFlags, v.nodeLink, err = clusterViewOf(l, m); err != nil {
		return v, err
	}
	for _, kv := range strings.Split(raftInfo(l)["raft_member_"+m.id], ",") {
		key, val, _ := strings.Cut(kv, "=")
		switch key {
		case "reachable":
			v.reachable = val
		case "health":
			v.health = val
		}
	}
	return v, nil
}

// clusterViewOf returns what nd's CLUSTER SHARDS (health) and CLUSTER
// NODES (flags, link-state) say of member m (group "default").
func clusterViewOf(nd, m *clusterNode) (health, flags, link string, err error) {
	c := redis.NewClient(&redis.Options{Addr: nd.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := clusterIDOf("default", m.id)
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return "", "", "", fmt.Errorf("%s: CLUSTER SHARDS: %v", nd.id, err)
	}
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.ID == id {
				health = n.Health
			}
		}
	}
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return "", "", "", fmt.Errorf("%s: CLUSTER NODES: %v", nd.id, err)
	}
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) >= 8 && f[0] == id {
			flags, link = f[2], f[7]
		}
	}
	return health, flags, link, nil
}

// linesAbout counts the lines of out that name member id or its raft
// address.
func linesAbout(out, id, raftAddr string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, raftAddr) || strings.Contains(line, "="+id+" ") || strings.HasSuffix(line, "="+id) {
			n++
		}
	}
	return n
}

// kill -9 of a follower of a 3-node group: within a few seconds the
// leader's INFO replication shows it disconnected (not counted in
// connected_slaves, its lag growing), CLUSTER SHARDS failed, CLUSTER NODES
// fail? then fail (after --cluster-node-timeout) and disconnected, as
// RAFT.INFO says reachable=0; raft's failed heartbeats to it (several a
// second) leave a bounded number of log lines; once it restarts, every
// view shows it online and connected again.
func TestDeadMemberShownDown(t *testing.T) {
	nodes := startCluster(t, 3, "--cluster-node-timeout", "3s")
	l := nodes[waitLeader(t, nodes)]
	var m, o *clusterNode // the member killed, the other follower
	for _, nd := range nodes {
		switch {
		case nd == l:
		case m == nil:
			m = nd
		default:
			o = nd
		}
	}
	raftAddr := ""
	for _, kv := range strings.Split(raftInfo(l)["raft_member_"+m.id], ",") {
		if v, ok := strings.CutPrefix(kv, "raft="); ok {
			raftAddr = v
		}
	}
	if raftAddr == "" {
		t.Fatalf("RAFT.INFO on the leader names no raft address for %s: %v", m.id, raftInfo(l))
	}
	online := func() error {
		v, err := viewOf(l, m)
		switch {
		case err != nil:
			return err
		case v.infoState != "online" || v.connected != 2 || !v.connectedIdx || v.infoLag > 3 || v.infoOffset == "0":
			return fmt.Errorf("INFO replication: %s state=%s offset=%s lag=%d, connected_slaves %d; want online, a real offset, lag <= 3, 2 connected",
				m.id, v.infoState, v.infoOffset, v.infoLag, v.connected)
		case v.shardHealth != "online":
			return fmt.Errorf("CLUSTER SHARDS: %s health %q, want online", m.id, v.shardHealth)
		case strings.Contains(v.nodeFlags, "fail") || v.nodeLink != "connected":
			return fmt.Errorf("CLUSTER NODES: %s flags %q link %q, want no fail flag, connected", m.id, v.nodeFlags, v.nodeLink)
		case v.reachable != "1" || v.health != "online":
			return fmt.Errorf("RAFT.INFO: %s reachable=%s health=%s, want 1 and online", m.id, v.reachable, v.health)
		}
		if h, flags, link, err := clusterViewOf(o, m); err != nil || h != "online" || strings.Contains(flags, "fail") || link != "connected" {
			return fmt.Errorf("follower %s: %s health %q flags %q link %q (%v), want online, connected", o.id, m.id, h, flags, link, err)
		}
		return nil
	}
	poll.Until(t, 20*time.Second, online)

	m.kill()
	t0 := time.Now()
	var v memberView
	poll.Until(t, 20*time.Second, func() error {
		var err error
		if v, err = viewOf(l, m); err != nil {
			return err
		}
		switch {
		case v.reachable != "0":
			return fmt.Errorf("RAFT.INFO: %s reachable=%s, want 0", m.id, v.reachable)
		case v.infoState == "online" || v.connected != 1 || v.connectedIdx:
			return fmt.Errorf("INFO replication: killed %s state=%s, connected_slaves %d (listed among them: %v); want not online, 1 connected",
				m.id, v.infoState, v.connected, v.connectedIdx)
		case v.shardHealth != "failed":
			return fmt.Errorf("CLUSTER SHARDS: killed %s health %q, want failed", m.id, v.shardHealth)
		case !strings.HasSuffix(v.nodeFlags, ",fail?") && !strings.HasSuffix(v.nodeFlags, ",fail") || v.nodeLink != "disconnected":
			return fmt.Errorf("CLUSTER NODES: killed %s flags %q link %q, want fail? or fail, disconnected", m.id, v.nodeFlags, v.nodeLink)
		}
		// The other follower shows its leader's verdict.
		if h, flags, link, err := clusterViewOf(o, m); err != nil || h != "failed" || !strings.Contains(flags, ",fail") || link != "disconnected" {
			return fmt.Errorf("follower %s: killed %s health %q flags %q link %q (%v), want failed, fail? or fail, disconnected", o.id, m.id, h, flags, link, err)
		}
		return nil
	})
	t.Logf("%s shown down %v after kill -9: INFO state=%s, SHARDS %s, NODES %s %s, RAFT.INFO health=%s",
		m.id, time.Since(t0).Round(time.Millisecond), v.infoState, v.shardHealth, v.nodeFlags, v.nodeLink, v.health)
	// fail? becomes fail once it has been silent for --cluster-node-timeout.
	poll.Until(t, 20*time.Second, func() error {
		v, err := viewOf(l, m)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(v.nodeFlags, ",fail") || v.health != "fail" {
			return fmt.Errorf("CLUSTER NODES flags %q, RAFT.INFO health=%s; want fail after the 3s node timeout", v.nodeFlags, v.health)
		}
		return nil
	})

	// While it stays down raft retries it several times a second; over
	// the next 6 s (measured by the leader's own lag= for it) the leader
	// logs a handful of lines about it at most.
	before := linesAbout(l.output.String(), m.id, raftAddr)
	v, _ = viewOf(l, m)
	from := v.infoLag
	poll.Until(t, 30*time.Second, func() error {
		v, err := viewOf(l, m)
		if err != nil {
			return err
		}
		if v.infoLag < from+6 {
			return fmt.Errorf("INFO replication lag=%d for the dead %s, waiting for %d (it must grow by a second a second)", v.infoLag, m.id, from+6)
		}
		return nil
	})
	if n := linesAbout(l.output.String(), m.id, raftAddr) - before; n > 4 {
		t.Errorf("the leader logged %d lines about the dead %s in 6 s, want at most 4:\n%s", n, m.id, l.output)
	}
	// Held back, not lost: the first failure and the outage were logged.
	for _, want := range []string{"raft: failed to heartbeat to", "a member does not answer the leader"} {
		if !strings.Contains(l.output.String(), want) {
			t.Errorf("the leader's log lacks %q:\n%s", want, l.output)
		}
	}

	m.restart()
	poll.Until(t, 30*time.Second, online)
	if !strings.Contains(l.output.String(), "answers the leader again") {
		t.Errorf("the leader did not log that %s answers again:\n%s", m.id, l.output)
	}
}

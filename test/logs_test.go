package test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// warnOrError matches a WARN or ERROR line of the server's log.
var warnOrError = regexp.MustCompile(`(?m)^.*level=(WARN|ERROR).*$`)

// assertQuietLog fails the test for every WARN or ERROR line in out: a
// healthy start and stop must not teach operators to ignore them.
func assertQuietLog(t *testing.T, what, out string) {
	t.Helper()
	if lines := warnOrError.FindAllString(out, -1); len(lines) > 0 {
		t.Errorf("%s logged %d WARN/ERROR line(s):\n%s\n\nwhole log:\n%s", what, len(lines), strings.Join(lines, "\n"), out)
	}
}

// A clean start and SIGTERM, standalone and as a three-node group, log no
// WARN or ERROR; the start line names the listeners really opened, and the
// leader's ready line shows no unset time.
func TestLogsCleanStartStop(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := startServer(t)
		c := s.client(t, 2)
		if err := c.Do(ctxT(t), "CL.THROTTLE", "k", 5, 10, 60).Err(); err != nil {
			t.Fatal(err)
		}
		s.stop()
		out := s.output.String()
		assertQuietLog(t, "standalone start and SIGTERM", out)
		if !strings.Contains(out, `msg="cellserver started"`) || !strings.Contains(out, "addr="+s.Addr) || strings.Contains(out, "tls_") {
			t.Errorf("start line does not name the plaintext listener %s alone:\n%s", s.Addr, out)
		}
	})
	t.Run("group", func(t *testing.T) {
		nodes := startCluster(t, 3)
		l := waitLeader(t, nodes)
		c := noRetryClient(t, nodes[l].Addr)
		if _, err := throttle(ctxT(t), c, "k", 5, 10, 60); err != nil {
			t.Fatal(err)
		}
		waitMembers(t, nodes, 3)
		for _, nd := range nodes {
			out := nd.output.String()
			assertQuietLog(t, nd.id+"'s start", out)
			if strings.Contains(out, "time=-9223372036854775808") {
				t.Errorf("%s logged an unset time:\n%s", nd.id, out)
			}
		}
		// A follower's own log of its SIGTERM stays quiet (the others
		// rightly warn that a member went away).
		f := (l + 1) % len(nodes)
		nodes[f].stop()
		assertQuietLog(t, nodes[f].id+"'s start and SIGTERM", nodes[f].output.String())
	})
	// The README's start: three nodes with --bootstrap-expect 3, each
	// listing the others, launched one after the other.
	t.Run("bootstrap-expect", func(t *testing.T) {
		var nodes []*clusterNode
		for i := 1; i <= 3; i++ {
			nodes = append(nodes, &clusterNode{server: newServer(t), id: "n" + strconv.Itoa(i)})
		}
		for i, nd := range nodes {
			var join []string
			for j, o := range nodes {
				if j != i {
					join = append(join, o.Addr)
				}
			}
			nd.args = append(nd.args, "--node-id", nd.id, "--raft-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)),
				"--bootstrap-expect", "3", "--join", strings.Join(join, ","))
			nd.launch()
		}
		for _, nd := range nodes {
			nd.waitReady()
		}
		waitMembers(t, nodes, 3)
		for _, nd := range nodes {
			assertQuietLog(t, nd.id+"'s start", nd.output.String())
		}
	})
}

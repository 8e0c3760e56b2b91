package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cellserver/cellserver/replication"
)

// fakeRaft answers Info with a fixed value.
type fakeRaft replication.Info

func (f fakeRaft) Info() replication.Info { return replication.Info(f) }

// TestRaftReadiness checks the readiness rule against each member state.
func TestRaftReadiness(t *testing.T) {
	for _, tc := range []struct {
		name string
		inf  replication.Info
		want error
	}{
		{"no leader", replication.Info{State: "follower"}, ErrNoLeader},
		{"candidate", replication.Info{State: "candidate", CommitIndex: 9, AppliedIndex: 9}, ErrNoLeader},
		{"removed", replication.Info{State: "removed", Removed: true, LeaderID: "n1", CommitIndex: 9, AppliedIndex: 9}, ErrRemoved},
		{"leader not yet ready", replication.Info{State: "leader", LeaderID: "n1", CommitIndex: 9, AppliedIndex: 7}, ErrCatchingUp},
		{"leader ready", replication.Info{State: "leader", LeaderID: "n1", Ready: true, CommitIndex: 9, AppliedIndex: 9}, nil},
		{"wiped follower heard a heartbeat", replication.Info{State: "follower", LeaderID: "n1"}, ErrCatchingUp},
		{"follower behind", replication.Info{State: "follower", LeaderID: "n1", CommitIndex: 9, AppliedIndex: 8}, ErrCatchingUp},
		{"follower caught up", replication.Info{State: "follower", LeaderID: "n1", CommitIndex: 9, AppliedIndex: 9, LastLogIndex: 9}, nil},
	} {
		got := RaftReadiness(fakeRaft(tc.inf))()
		if !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("%s: RaftReadiness = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProbeEndpoints checks /healthz and /readyz over HTTP: /healthz is 200
// whatever the readiness, /readyz follows it with 200 or 503 and the reason.
func TestProbeEndpoints(t *testing.T) {
	var mu sync.Mutex // the handler reads reason on the server's goroutines
	var reason error
	h, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), func() error {
		mu.Lock()
		defer mu.Unlock()
		return reason
	}, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	get := func(path string) (int, string) {
		t.Helper()
		r, err := http.Get("http://" + h.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	for _, tc := range []struct {
		reason     error
		path       string
		code       int
		bodyPrefix string
	}{
		{ErrNoLeader, "/healthz", 200, "ok"},
		{ErrNoLeader, "/readyz", 503, "not ready: no leader known"},
		{nil, "/readyz", 200, "ready"},
		{nil, "/healthz", 200, "ok"},
		{nil, "/nothing", 404, ""},
	} {
		mu.Lock()
		reason = tc.reason
		mu.Unlock()
		code, body := get(tc.path)
		if code != tc.code || !strings.HasPrefix(body, tc.bodyPrefix) {
			t.Errorf("GET %s (readiness %v) = %d %q, want %d %q", tc.path, tc.reason, code, body, tc.code, tc.bodyPrefix)
		}
	}
}

package metrics

import (
	"errors"
	"fmt"
	"net/http"
)

// Readiness reports whether the server should receive traffic: nil when it
// should, otherwise why not (the reason is the body of /readyz's 503). It
// is called on every /readyz request, from the HTTP server's goroutines, so
// it must be safe for concurrent use and must not block on the network.
type Readiness func() error

// Reasons a cluster member is not ready (RaftReadiness).
var (
	// ErrNoLeader: the member knows no leader (an election is running, or
	// it cannot reach the others).
	ErrNoLeader = errors.New("no leader known")
	// ErrRemoved: the member was removed from its group's configuration.
	ErrRemoved = errors.New("removed from the cluster")
	// ErrCatchingUp: the member has not applied every entry it knows to
	// be committed, or a new leader has not yet applied its predecessors'
	// entries.
	ErrCatchingUp = errors.New("catching up with the leader")
)

// RaftReadiness is the readiness of a cluster member: it knows a leader (is
// one, or follows one) and has applied the log up to it. A leader is ready
// once it has applied every entry of earlier terms (Info.Ready); a follower
// once it has applied every entry its leader told it is committed, and that
// is at least one entry (a member with an empty or wiped log that has only
// heard a heartbeat is not ready). A follower learns the commit index in
// batches while it catches up, so between two batches it can read ready a
// moment before it has the whole log; it never reads ready without a
// leader.
func RaftReadiness(r Raft) Readiness {
	return func() error {
		inf := r.Info()
		switch {
		case inf.Removed:
			return ErrRemoved
		case inf.LeaderID == "":
			return ErrNoLeader
		case inf.State == "leader":
			if !inf.Ready {
				return ErrCatchingUp
			}
		case inf.State != "follower":
			return ErrNoLeader
		case inf.CommitIndex == 0 || inf.AppliedIndex < inf.CommitIndex:
			return fmt.Errorf("%w: applied %d of %d", ErrCatchingUp, inf.AppliedIndex, inf.CommitIndex)
		}
		return nil
	}
}

// healthz answers 200 while the process serves HTTP at all: the liveness
// probe. It checks nothing else, so that a slow disk or a lost quorum does
// not get a healthy process restarted.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 "ready" when ready reports nil, and 503 with the
// reason otherwise: the readiness probe. A nil ready is always ready.
func readyz(ready Readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, "not ready:", err)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	}
}

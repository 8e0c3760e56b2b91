package replication

import (
	"context"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"time"

	"github.com/cellserver/cellserver/shards"
)

// WriteGroup is Write in the group named group, which may be another group
// of the cluster. This node's own group takes Write's path. Another group's
// ops go to that group's leader, as this node's routing table names it,
// as an apply request over the forwarding service (the request a follower
// sends its own leader), retried while the attempt certainly applied
// nothing (no leader known, the target was not the leader, the connection
// could not be made), asking the directory for a fresh view of that group
// each time, until ctx ends or NoLeaderTimeout (plus the directory's
// interval, in which this node learns that group's new leader) passes.
//
// The group's FSM checks each op's slots at apply time as for any write, so
// an op whose keys that group does not serve (any longer) fails alone with
// cluster.ErrMoved, cluster.ErrAsk or cluster.ErrTryAgain in res[i].Err;
// this node then refreshes its view of the groups at once. Errors: as Write (ErrNoLeader,
// ErrLeadershipLost: outcome unknown, ErrRemoved, ErrShutdown, ctx's
// error), and ErrNoLeader when no group of that name is known.
func (n *Node) WriteGroup(ctx context.Context, group string, ops []shards.Op, res []shards.Result) error {
	if group == n.cfg.Group {
		return n.Write(ctx, ops, res)
	}
	if empty, err := n.checkWrite(ops, res); empty || err != nil {
		return err
	}
	payload := encodeForward(ops)
	// A new leader there is named here within a directory interval of
	// its election.
	deadline := time.Now().Add(n.cfg.NoLeaderTimeout + directoryInterval)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		if err := n.ctx.Err(); err != nil {
			return ErrShutdown
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		addr, ok := n.groupLeader(group)
		if ok {
			// The leader answers quickly or steps down (lease); the grace
			// covers a slow commit without stretching the no-leader bound.
			cctx, cancel := context.WithDeadline(ctx, deadline.Add(forwardGrace))
			body, err := n.fwd.do(cctx, addr, reqApply, payload, false)
			cancel()
			if err == nil {
				if err = decodeResults(body, res); err != nil {
					return fmt.Errorf("replication: write in group %s: %w", group, err)
				}
				for i := range res {
					if errors.Is(res[i].Err, cluster.ErrMoved) || errors.Is(res[i].Err, cluster.ErrAsk) {
						n.kickDirectory() // the view of that group is stale
						break
					}
				}
				return nil
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) && !errors.Is(err, errNotSent) {
				return groupWriteError(ctx, group, addr, err)
			}
		}
		n.kickDirectory()
		if !n.sleepUntil(ctx, deadline, groupPoll) {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("replication: write in group %s: %w", group, ErrNoLeader)
		}
	}
}

// groupPoll is how often WriteGroup looks again for another group's leader
// while it has none (the directory, kicked, asks that group meanwhile).
const groupPoll = 50 * time.Millisecond

// groupLeader returns the raft address of group's leader in this node's
// routing table.
func (n *Node) groupLeader(group string) (string, bool) {
	rt := n.Routing()
	g := rt.Group(group)
	if g < 0 {
		return "", false
	}
	m, ok := rt.Groups[g].Leader()
	return m.RaftAddr, ok && m.RaftAddr != ""
}

// groupWriteError words a failed apply request to another group's leader
// as forward does: a whole-request answer keeps its identity; a transport
// failure after the request was sent means the outcome is unknown
// (ErrLeadershipLost), unless ctx ended.
func groupWriteError(ctx context.Context, group, addr string, err error) error {
	var pe *PeerError
	switch {
	case errors.As(err, &pe), errors.Is(err, ErrBadPayload), errors.Is(err, ErrLeadershipLost), errors.Is(err, ErrQuorumAtRisk):
		return fmt.Errorf("replication: write in group %s: %w", group, err)
	case ctx.Err() != nil:
		return fmt.Errorf("replication: write in group %s at %s: %w (outcome unknown)", group, addr, ctx.Err())
	}
	return fmt.Errorf("replication: write in group %s at %s: %w (%v)", group, addr, ErrLeadershipLost, err)
}

// sleepUntil waits d, never past deadline; it reports false when deadline
// has passed or ctx or the node ended.
func (n *Node) sleepUntil(ctx context.Context, deadline time.Time, d time.Duration) bool {
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(min(wait, d))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	case <-n.ctx.Done():
		return false
	}
	return time.Now().Before(deadline)
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// A member is its NodeID, not its address (DESIGN.md, "Membership by
// identity"). A node restarted from its raft state at another raft address
// than the configuration lists for it (a pod rescheduled with a new IP, a
// DHCP lease, a compose restart) asks the leader to record the new one:
// the same Join a new node sends, which the leader turns into an address
// change of the existing member (moveMember) once its own checks
// (verifyMove) confirm that the node there is that member. Its suffrage is
// kept, so a voter stays a voter and the quorum never shrinks or grows.

// moveMember records that member servers[i] now listens at newAddr, on the
// ready leader under changeMu (index is the configuration's index, so that
// a concurrent change fails the request instead of being overwritten).
// voter reports whether the member is a voter. Refused with ErrIDInUse,
// and logged with the reason, when verifyMove refuses.
func (ms *Members) moveMember(ctx context.Context, servers []raft.Server, index uint64, i int, newAddr, respAddr string) (voter bool, err error) {
	n := ms.n
	s := servers[i]
	id, old := string(s.ID), string(s.Address)
	if j := slices.IndexFunc(servers, func(o raft.Server) bool { return string(o.Address) == newAddr }); j >= 0 {
		err = fmt.Errorf("%s is the raft address of member %s", newAddr, servers[j].ID)
	} else {
		err = ms.verifyMove(ctx, id, old, newAddr)
	}
	if err != nil {
		n.log.Warn("replication: refused to move a member to a new raft address", "member", id, "old", old, "new", newAddr, "reason", err.Error())
		if le := (*LogError)(nil); errors.As(err, &le) {
			return false, le
		}
		return false, fmt.Errorf("replication: join %s at %s (a member at %s): %v: %w", id, newAddr, old, err, ErrIDInUse)
	}
	ms.setPending(id, respAddr)
	// AddVoter and AddNonvoter on an existing server change its address
	// and keep its suffrage.
	var f raft.IndexFuture
	if s.Suffrage == raft.Voter {
		f = n.raft.AddVoter(s.ID, raft.ServerAddress(newAddr), index, n.cfg.NoLeaderTimeout)
	} else {
		f = n.raft.AddNonvoter(s.ID, raft.ServerAddress(newAddr), index, n.cfg.NoLeaderTimeout)
	}
	if err := f.Error(); err != nil {
		return false, translate("move member", err)
	}
	n.log.Info("replication: a member's raft address changed; the configuration now lists the new one",
		"member", id, "old", old, "new", newAddr, "voter", s.Suffrage == raft.Voter)
	return s.Suffrage == raft.Voter, nil
}

// verifyMove is the leader's own check that the node at newAddr is member
// id, which the configuration lists at old. The claim itself proves
// nothing; the leader asks both addresses:
//
//  1. the node at newAddr passes the raft port's handshake as the leader
//     dials it — with a cluster secret it proves the secret, with TLS it
//     presents a certificate of the cluster's CA — and answers the status
//     request as id, of this group;
//  2. nothing answers as id at old any more (two live nodes with one id
//     are a misconfiguration, and a live member is never displaced),
//     unless it is the same process (the status answers' Instance), still
//     reachable at the old address: a node that switched from advertising
//     an IP to advertising a name for it;
//  3. its raft log is this group's (checkLog, groupid.go): it records
//     this group's id, or predates it; never another group's log (a
//     process bootstrapped on its own, whose entries match the group's by
//     index and term), nor an empty one (a new or wiped node with a
//     member's id would vote without the log its vote stands for). A
//     *LogError then.
//
// Without a secret or TLS nothing on the raft port is authenticated (any
// peer that reaches it can speak raft), so the move rests on these checks
// alone; with them, step 1 is also an authentication.
func (ms *Members) verifyMove(ctx context.Context, id, old, newAddr string) error {
	n := ms.n
	cctx, cancel := context.WithTimeout(ctx, n.mship.statusTimeout())
	st, err := n.mship.askStatus(cctx, newAddr)
	cancel()
	switch {
	case err != nil:
		return fmt.Errorf("the node at %s does not answer a status request (tls-replication, the CA and cluster-secret must match on every node): %w", newAddr, err)
	case st.ID != id:
		return fmt.Errorf("the node at %s answers as %q", newAddr, st.ID)
	case st.Group != "" && st.Group != n.cfg.Group:
		return fmt.Errorf("the node at %s belongs to group %q: %w", newAddr, st.Group, ErrOtherGroup)
	}
	moved := st
	cctx, cancel = context.WithTimeout(ctx, n.mship.statusTimeout())
	st, err = n.mship.askStatus(cctx, old)
	cancel()
	// One process reachable at both addresses (an IP advertised before, a
	// name for it now) is the member moving, not a second node.
	if err == nil && st.ID == id && (st.Instance == 0 || st.Instance != moved.Instance) {
		return fmt.Errorf("member %s still answers at %s: two nodes have that id", id, old)
	}
	if le := checkLog(n.fsm.groupID.Load(), moved, true); le != nil {
		le.Addr = newAddr
		return le
	}
	return nil
}

// followAddress runs on a node restarted from raft state, until the
// configuration lists this node at the raft address it advertises now (or
// not at all: a removed node is joined again by an operator), or the node
// closes. While it lists another address, it asks the leader to record
// this one, every round (backing off to 2 s), and says why it cannot.
func (ms *Members) followAddress() {
	n := ms.n
	defer n.wg.Done()
	own := string(n.trans.LocalAddr())
	backoff := 100 * time.Millisecond
	var asked bool
	var lastWhy string
	var lastLog time.Time
	for {
		if servers, _, err := n.mship.configuration(); err == nil {
			i := serverIndex(servers, n.cfg.NodeID)
			if i < 0 || string(servers[i].Address) == own {
				if asked && i >= 0 {
					n.log.Info("replication: the configuration lists this node at its new raft address", "raft", own)
				}
				return
			}
			if !asked {
				n.log.Info("replication: this node's raft address changed since the configuration was written; asking the leader to record the new one",
					"old", servers[i].Address, "new", own)
				asked = true
			}
			if err := ms.tellLeader(servers, own); err != nil {
				why := err.Error()
				if why != lastWhy || time.Since(lastLog) >= 10*time.Second {
					n.log.Warn("replication: cannot record this node's new raft address yet; retrying (list reachable members in join)",
						"new", own, "err", why)
					lastWhy, lastLog = why, time.Now()
				}
			} else {
				backoff = 100 * time.Millisecond // the change is committed: wait for it to arrive here
			}
		}
		if !n.boot.pause(backoff) {
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// tellLeader asks the leader to record this node at own: itself when it
// leads (a group of one), else the leader that the members of this node's
// configuration name (at the addresses it last knew), then through the
// Join peers over RESP (whose names may have followed them). nil once the
// leader has committed it.
func (ms *Members) tellLeader(servers []raft.Server, own string) error {
	n := ms.n
	if n.ready.Load() {
		ctx, cancel := context.WithTimeout(n.ctx, 2*n.cfg.NoLeaderTimeout)
		defer cancel()
		return ms.join(ctx, n.cfg.NodeID, own, n.cfg.RespAddr)
	}
	var errs []string
	if ref, _, ok := n.mship.askLeader(servers); ok && ref.raft != "" {
		ctx, cancel := context.WithTimeout(n.ctx, 2*n.cfg.NoLeaderTimeout)
		_, err := n.fwd.do(ctx, ref.raft, reqJoin, encodeJoin(n.cfg.NodeID, own, n.cfg.RespAddr), true)
		cancel()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Sprintf("leader %s at %s: %v", ref.id, ref.raft, err))
	} else {
		var addrs []string
		for _, s := range servers {
			if string(s.ID) != n.cfg.NodeID {
				addrs = append(addrs, string(s.ID)+"="+string(s.Address))
			}
		}
		errs = append(errs, fmt.Sprintf("no member at the raft addresses this node knows (%s) names a leader", strings.Join(addrs, ", ")))
	}
	for _, p := range n.cfg.joinPeers() {
		if n.ctx.Err() != nil {
			return ErrShutdown
		}
		err := n.boot.joinThrough(p)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Sprintf("join peer %s: %v", p, err))
	}
	return errors.New(strings.Join(errs, "; "))
}

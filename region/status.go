package region

import (
	"sort"
	"strconv"
	"sync/atomic"
)

// PeerStatus is one peer region as this region sees it.
type PeerStatus struct {
	Name  string
	Addrs []string
	// State is "up" (the last call was answered), "down" (it was not) or
	// "unknown" (no call yet).
	State string
	// LastContactMs is how long ago (ms) the peer last answered; -1: never.
	LastContactMs int64
	// Forwarded counts global decisions it answered for this region;
	// Failed calls to it (global or async) that found it unreachable;
	// Served decisions this region made for it (REGION.EXEC it sent
	// here).
	Forwarded, Failed, Served int64
	// LastError is the last failure reaching it ("" when none).
	LastError string
	// Async consumption for it: Queued consumptions waiting or in flight,
	// Dropped ones (backlog full, or refused by it), BatchesSent and
	// OpsSent acknowledged, Retries of batches not acknowledged yet, and
	// LagMs how long the oldest unacknowledged one has waited (ms).
	Queued, Dropped, BatchesSent, OpsSent, Retries, LagMs int64
	// Resequenced counts batches it refused as out of sequence (it lacked
	// batches it had acknowledged) and that were sent again as the one it
	// expected.
	Resequenced int64
	// Async consumption from it: BatchesApplied and OpsApplied here,
	// Duplicates (batches received again and ignored), LastAppliedMs how
	// long ago the last was applied (-1: never).
	BatchesApplied, OpsApplied, Duplicates, LastAppliedMs int64
	// OutOfSequence counts its batches refused here because batches of
	// their lane were missing before them (nothing applied).
	OutOfSequence int64
	// PolicyMismatches counts its consumptions and global decisions for
	// keys this region's policy puts under another mode or home (served
	// anyway): non-zero means the two regions' region-policy differ.
	PolicyMismatches int64
}

// Status is the state of this region's links, for INFO regions and REGION
// STATUS.
type Status struct {
	Name        string
	Policies    int
	Unreachable string
	// Share and Total are this region's weight and every region's: a
	// split key's share is Share/Total of its limit.
	Share, Total int64
	// Forwarded counts decisions answered by a home region; Fallbacks
	// decisions answered per region-unreachable; Refused peer calls
	// refused (wrong region, unknown origin, malformed).
	Forwarded, Fallbacks, Refused int64
	Peers                         []PeerStatus
}

var unreachableNames = [...]string{"error", "local", "deny"}

// String is the region-unreachable word.
func (u Unreachable) String() string {
	if int(u) < len(unreachableNames) {
		return unreachableNames[u]
	}
	return "unknown"
}

// Status returns the gate's status now.
func (g *Gate) Status() Status {
	now := g.cfg.Now()
	s := Status{
		Name: g.cfg.Name, Policies: g.policy.Load().Len(), Unreachable: g.cfg.Unreachable.String(),
		Share: g.share, Total: g.total,
		Forwarded: g.forwarded.Load(), Fallbacks: g.fallbacks.Load(), Refused: g.refused.Load(),
	}
	for _, p := range g.cfg.Peers {
		l := g.links[p.Name]
		ps := PeerStatus{Name: p.Name, Addrs: p.Addrs, LastContactMs: -1,
			Forwarded: l.forwarded.Load(), Failed: l.failed.Load()}
		switch l.state.Load() {
		case linkUp:
			ps.State = "up"
		case linkDown:
			ps.State = "down"
			ps.LastError = l.lastError()
		default:
			ps.State = "unknown"
		}
		if t := l.lastOK.Load(); t != 0 {
			ps.LastContactMs = (now - t) / 1e6
		}
		if n, ok := g.served.Load(p.Name); ok {
			ps.Served = n.(*atomic.Int64).Load()
		}
		o := g.outboxes[p.Name]
		ps.Queued, ps.Dropped, ps.Retries = o.queued.Load(), o.dropped.Load(), o.retries.Load()
		ps.BatchesSent, ps.OpsSent, ps.LagMs = o.batchesSent.Load(), o.opsSent.Load(), o.lag(now)/1e6
		ps.Resequenced = o.resequenced.Load()
		in := g.inbox(p.Name)
		ps.BatchesApplied, ps.OpsApplied, ps.Duplicates = in.batches.Load(), in.ops.Load(), in.duplicates.Load()
		ps.PolicyMismatches = in.mismatches.Load()
		ps.OutOfSequence = in.outOfSequence.Load()
		ps.LastAppliedMs = -1
		if t := in.last.Load(); t != 0 {
			ps.LastAppliedMs = (now - t) / 1e6
		}
		s.Peers = append(s.Peers, ps)
	}
	sort.Slice(s.Peers, func(i, j int) bool { return s.Peers[i].Name < s.Peers[j].Name })
	return s
}

// Fields returns s as INFO regions' name, value pairs, in order.
func (s *Status) Fields() [][2]string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := [][2]string{
		{"region", s.Name},
		{"region_policies", strconv.Itoa(s.Policies)},
		{"region_unreachable", s.Unreachable},
		{"region_split_share", i(s.Share) + "/" + i(s.Total)},
		{"region_forwarded", i(s.Forwarded)},
		{"region_fallbacks", i(s.Fallbacks)},
		{"region_refused", i(s.Refused)},
		{"region_peers", strconv.Itoa(len(s.Peers))},
	}
	for _, p := range s.Peers {
		f = append(f, [2]string{"region_peer_" + p.Name,
			"state=" + p.State + ",last_contact_ms=" + i(p.LastContactMs) + ",forwarded=" + i(p.Forwarded) +
				",failed=" + i(p.Failed) + ",served=" + i(p.Served) +
				",queued=" + i(p.Queued) + ",dropped=" + i(p.Dropped) + ",batches_sent=" + i(p.BatchesSent) +
				",ops_sent=" + i(p.OpsSent) + ",retries=" + i(p.Retries) + ",resequenced=" + i(p.Resequenced) + ",lag_ms=" + i(p.LagMs) +
				",batches_applied=" + i(p.BatchesApplied) + ",ops_applied=" + i(p.OpsApplied) +
				",duplicates=" + i(p.Duplicates) + ",out_of_sequence=" + i(p.OutOfSequence) + ",last_applied_ms=" + i(p.LastAppliedMs) +
				",policy_mismatches=" + i(p.PolicyMismatches)})
	}
	return f
}

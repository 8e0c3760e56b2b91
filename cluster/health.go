package cluster

import "time"

// Health is one member's state as its group's leader judges it: the leader
// asks every other member for its status once a second (replication's
// health round), and the views (CLUSTER NODES, CLUSTER SHARDS, INFO
// replication, RAFT.INFO) all show this one verdict, so that none of them
// reports a member healthy that another reports unreachable.
type Health uint8

const (
	// HealthUnknown: not judged here. Only a group's ready leader judges
	// its members (and a member whose first status request has not
	// completed yet is unknown); the
	// views show such a member as online, as they show a group they have
	// no verdict for.
	HealthUnknown Health = iota
	// HealthOnline: it answered the last status request and is caught up.
	HealthOnline
	// HealthLoading: it answers but is catching up: it has no log yet, or
	// it is further behind the leader than the log the leader keeps after
	// a snapshot (it is being sent a snapshot or a long run of entries).
	HealthLoading
	// HealthSuspect: it did not answer the last status request, for less
	// than the node timeout so far (Redis Cluster's PFAIL: CLUSTER NODES
	// flag fail?).
	HealthSuspect
	// HealthFailed: it has not answered for the node timeout or longer
	// (Redis Cluster's FAIL: flag fail).
	HealthFailed
)

// healthNames are the words Health's String and ParseHealth use (also on
// the wire between groups).
var healthNames = [...]string{HealthUnknown: "unknown", HealthOnline: "online", HealthLoading: "loading", HealthSuspect: "pfail", HealthFailed: "fail"}

// String returns "unknown", "online", "loading", "pfail" or "fail".
func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return "unknown"
}

// ParseHealth is String's inverse; any other word is HealthUnknown (a
// newer peer's state this node does not know shows as no verdict).
func ParseHealth(s string) Health {
	for h, name := range healthNames {
		if name == s {
			return Health(h)
		}
	}
	return HealthUnknown
}

// Reachable reports whether h is a verdict of a member that answers
// (online or loading) or no verdict at all.
func (h Health) Reachable() bool { return h < HealthSuspect }

// JudgeHealth is the one rule that turns what a leader knows of a member
// into its Health: asked tells whether any status request to it has
// completed (answered or failed) since this leader began asking — until
// then there is no verdict (HealthUnknown), so a member whose first
// answer is on its way is not shown fail? —, answered whether it answered
// the last status request, silence how long since its last answer (or since the leader
// began asking, when it never answered), lag how many entries it was
// behind at that answer, loadingLag the lag past which it counts as
// catching up (> 0), hasLog whether it reported any log at all, and
// nodeTimeout how long a member stays suspected before it is failed.
func JudgeHealth(asked, answered bool, silence time.Duration, lag, loadingLag uint64, hasLog bool, nodeTimeout time.Duration) Health {
	switch {
	case !asked:
		return HealthUnknown
	case !answered && silence >= nodeTimeout:
		return HealthFailed
	case !answered:
		return HealthSuspect
	case !hasLog || lag > loadingLag:
		return HealthLoading
	}
	return HealthOnline
}

package replication

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config configures a Node. Build it with DefaultConfig, set the fields that
// identify the node, and call Validate (NewNode does).
type Config struct {
	// NodeID is this node's stable, unique name in the cluster (raft server
	// id). It must not change across restarts.
	NodeID string
	// Group names the replication group this node belongs to (a raft
	// cluster of its own). Several groups form one Redis Cluster, each
	// owning hash slots; nodes of one group share its name, and a node of
	// another group is never joined. Default "default".
	Group string
	// RaftAddr is the host:port the raft transport listens on. The port may
	// be 0 (tests). The listening address is also what other nodes dial
	// unless RaftAdvertise is set; an unspecified host (0.0.0.0) therefore
	// needs RaftAdvertise.
	RaftAddr string
	// RaftAdvertise, when not empty, is the host:port other nodes use to
	// reach this node's raft transport. A host name is kept as a name in
	// the raft configuration and resolved by the other nodes at every
	// dial, so that it survives a restart at a new IP address (a
	// StatefulSet pod's DNS name).
	RaftAdvertise string
	// Resolver resolves the host names of the raft addresses this node
	// dials, at every dial (nil: the system resolver). Tests inject their
	// own names here.
	Resolver Resolver
	// RespAddr is the advertised host:port of this node's RESP server,
	// replicated through the log so that ROLE and INFO can list it (nodes
	// forward to each other's raft port, not there).
	RespAddr string
	// Dir holds the raft log and stable store (raft.db) and the snapshots
	// (snapshots/). Created if missing.
	Dir string
	// Bootstrap makes this node the only member of a new cluster when Dir
	// holds no raft state yet. With Join peers, only once every peer has
	// answered RAFT.HELLO and none belongs to a cluster (bootstrap.go); a
	// node that finds a cluster joins it instead, and one that cannot reach
	// every peer waits. Without Join peers it bootstraps at once: never
	// restart a wiped node that way. Exclusive with BootstrapExpect > 0.
	// Ignored when state exists.
	Bootstrap bool
	// BootstrapExpect, when > 0, is the number of servers (this one
	// included) that form a new cluster together: a node with no raft state
	// asks every Join peer (RAFT.HELLO) and bootstraps, with the same
	// configuration on every one of them, only once all have answered,
	// none belongs to a cluster, all expect the same number and they are
	// exactly BootstrapExpect distinct nodes. A node that finds a cluster
	// joins it. 1 behaves as Bootstrap. Ignored when state exists.
	BootstrapExpect int
	// Join is a comma-separated list of RESP host:port addresses of other
	// nodes (one is enough to join an existing cluster). A node with no
	// raft state asks a member among them (RAFT.JOIN) to be added,
	// retrying until it is; with Bootstrap or BootstrapExpect the list is
	// also who is asked before bootstrapping. Ignored when state exists.
	Join string

	// HeartbeatTimeout is how long a follower waits without contact from the
	// leader before it starts an election (randomised between 1× and 2×).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits before a new election
	// round (randomised between 1× and 2×).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without contact
	// with a quorum; a partitioned leader steps down after it. At most
	// HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the longest the leader waits before sending an
	// AppendEntries that carries only the commit index.
	CommitTimeout time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one (checked every SnapshotInterval).
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks whether to snapshot
	// (randomised between 1× and 2×).
	SnapshotInterval time.Duration
	// TrailingLogs is how many log entries are kept after a snapshot, so a
	// slightly lagging follower catches up from the log instead of a
	// snapshot install.
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots are kept on disk (at least 1).
	SnapshotRetain int
	// NoLeaderTimeout bounds how long a command waits for a leader (or for a
	// leader to be reachable) before it fails with ErrNoLeader. Never a hang.
	NoLeaderTimeout time.Duration
	// LocalReads lets every node answer reads from its own state at its own
	// last applied time, without confirming leadership: faster, but a read
	// may miss a write acknowledged moments ago on another node (stale by at
	// most the replication lag). Off by default: reads are linearizable.
	LocalReads bool
	// MaxBatch is the most operations packed into one raft log entry by the
	// group commit (>= 1).
	MaxBatch int
	// MaxInflight is how many log entries (on the leader) or forwarded
	// batches (on a follower) may be in flight at once (>= 1). While they
	// are, new writes queue and are packed together into the next entry:
	// fewer slots make larger batches, more slots lower latency at light
	// load.
	MaxInflight int
	// LogStore is the raft log and stable store: LogStoreBolt (raft.db,
	// the default) or LogStoreWAL (wal/, hashicorp's raft-wal). A node's
	// directory holds one kind; switching means wiping it and rejoining.
	LogStore string
	// AppendFsync is when log appends are synced to disk: FsyncAlways
	// (before a node counts towards a commit; the default), FsyncEverySec
	// (written before, synced once a second) or FsyncNo (never synced by
	// cellserver). See logstore.go for what each survives.
	AppendFsync string
	// Password, when the RESP servers at Join require one, is sent with
	// AUTH before RAFT.HELLO and RAFT.JOIN. Nothing else between nodes uses
	// RESP.
	Password string

	// Node-to-node security: every connection to the raft port (raft's
	// own and the forwarding service's) is authenticated as auth.go
	// describes.
	//
	// TLS, when not nil, wraps those connections in mutual TLS: this node
	// presents TLS.Certificates[0] when accepting and when dialing, and
	// accepts a peer only if its certificate chains to TLS.RootCAs (host
	// names are not checked: every certificate that CA signed counts as a
	// node). The certificate therefore needs both the serverAuth and
	// clientAuth extended key usages, or none. MinVersion is at least TLS
	// 1.2; other fields are ignored. Not modified.
	TLS *tls.Config
	// ClusterSecret, when not empty, is a secret all nodes share: a
	// connection is accepted only from a peer that proves it knows it
	// (HMAC-SHA256 over fresh nonces, compared in constant time), and a
	// dialed peer must prove it back. It authenticates, it does not
	// encrypt; with TLS it is checked as well.
	ClusterSecret string
	// HandshakeTimeout bounds an inbound raft-port connection's handshake
	// (TLS, header and authentication), from the moment it is accepted.
	// At least 10ms.
	HandshakeTimeout time.Duration
	// MaxHandshakes is the most inbound raft-port handshakes under way at
	// once (>= 1); when all are taken, a new connection displaces one that
	// has not sent its first message (admission.go).
	MaxHandshakes int

	// CleanupDeadServers lets the leader remove a member it has not reached
	// for DeadServerTimeout, provided the voters left keep a reachable
	// majority (a voter whose removal would not is kept, and logged). Off
	// by default: an operator removes dead members with RAFT.REMOVE.
	CleanupDeadServers bool
	// DeadServerTimeout is how long the leader must have failed to reach a
	// member (status requests, once a second) before CleanupDeadServers
	// removes it. Positive.
	DeadServerTimeout time.Duration
	// NodeTimeout is how long a member the leader cannot reach is shown
	// suspected (CLUSTER NODES fail?, Redis's PFAIL) before it is shown
	// failed (fail), like Redis's cluster-node-timeout. It changes only
	// what the views report. Positive.
	NodeTimeout time.Duration

	// ForwardPool is the most idle connections kept to the leader for
	// forwarding (>= 1).
	ForwardPool int
	// SweepInterval is how often expired keys are deleted actively, at the
	// last applied stamped time. 0 disables active expiry (lazy expiry still
	// hides expired keys).
	SweepInterval time.Duration
	// SweepBudget is the most keys one sweep examines.
	SweepBudget int

	// OnSetting, when set, is called on the apply goroutine with every
	// replicated setting (SetSetting) as this node applies it, and with
	// each one a restored snapshot holds, so that every node of the group
	// holds the same values in the same log order. It must not block.
	OnSetting func(name, value string)
	// Clock returns the current time in Unix nanoseconds. Only the leader
	// reads it, to stamp log entries and to answer reads; nil means the
	// system clock.
	Clock func() int64
	// RaftLogOutput receives raft's own log lines as text at RaftLogLevel
	// ("trace", "debug", "info", "warn", "error"; default "warn"); nil
	// passes them, structured, to the node's logger instead, with the
	// messages of a healthy start and stop demoted to debug (raftlog.go).
	RaftLogOutput io.Writer
	RaftLogLevel  string
}

// DefaultConfig returns a configuration with defaults suited to a LAN:
// failover well under two seconds (a follower notices a dead leader after
// 0.5–1 s, and an election takes one round trip; a partitioned leader steps
// down after 0.5 s without a quorum), snapshots every 8192 entries,
// linearizable reads, commands waiting at most 3 s for a leader. The lease
// equals the heartbeat timeout rather than half of it: on a loaded machine a
// 250 ms scheduling stall made healthy leaders step down.
func DefaultConfig() Config {
	return Config{
		Group:              "default",
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      20 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   30 * time.Second,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		NoLeaderTimeout:    3 * time.Second,
		MaxBatch:           1024,
		MaxInflight:        2,
		LogStore:           LogStoreBolt,
		AppendFsync:        FsyncAlways,
		DeadServerTimeout:  30 * time.Second,
		NodeTimeout:        15 * time.Second,
		ForwardPool:        16,
		HandshakeTimeout:   time.Second,
		MaxHandshakes:      1024,
		SweepInterval:      100 * time.Millisecond,
		SweepBudget:        1000,
		RaftLogLevel:       "warn",
	}
}

// Validate reports the first invalid field, wrapped with context.
func (c *Config) Validate() error {
	bad := func(field, why string) error {
		return fmt.Errorf("replication: config: %s %s", field, why)
	}
	switch {
	case c.NodeID == "":
		return bad("NodeID", "is empty")
	case !validGroupName(c.Group):
		return bad("Group", "must be 1 to 64 letters, digits, '-', '_' or '.'")
	case c.Dir == "":
		return bad("Dir", "is empty")
	case c.RespAddr == "":
		return bad("RespAddr", "is empty")
	case c.BootstrapExpect < 0:
		return bad("BootstrapExpect", "must not be negative")
	case c.Bootstrap && c.BootstrapExpect > 0:
		return errors.New("replication: config: Bootstrap and BootstrapExpect are exclusive (BootstrapExpect 1 is Bootstrap)")
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return bad("HeartbeatTimeout", "is below 5ms")
	case c.ElectionTimeout < 5*time.Millisecond:
		return bad("ElectionTimeout", "is below 5ms")
	case c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("LeaderLeaseTimeout", "must be between 5ms and HeartbeatTimeout")
	case c.CommitTimeout <= 0:
		return bad("CommitTimeout", "must be positive")
	case c.SnapshotThreshold == 0:
		return bad("SnapshotThreshold", "must be positive")
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("SnapshotInterval", "is below 5ms")
	case c.SnapshotRetain < 1:
		return bad("SnapshotRetain", "must be at least 1")
	case c.NoLeaderTimeout <= 0:
		return bad("NoLeaderTimeout", "must be positive")
	case c.MaxBatch < 1:
		return bad("MaxBatch", "must be at least 1")
	case c.MaxInflight < 1:
		return bad("MaxInflight", "must be at least 1")
	case c.LogStore != LogStoreBolt && c.LogStore != LogStoreWAL:
		return bad("LogStore", "must be "+LogStoreBolt+" or "+LogStoreWAL)
	case c.AppendFsync != FsyncAlways && c.AppendFsync != FsyncEverySec && c.AppendFsync != FsyncNo:
		return bad("AppendFsync", "must be always, everysec or no")
	case c.DeadServerTimeout <= 0:
		return bad("DeadServerTimeout", "must be positive")
	case c.NodeTimeout <= 0:
		return bad("NodeTimeout", "must be positive")
	case c.ForwardPool < 1:
		return bad("ForwardPool", "must be at least 1")
	case c.HandshakeTimeout < 10*time.Millisecond:
		return bad("HandshakeTimeout", "is below 10ms")
	case c.MaxHandshakes < 1:
		return bad("MaxHandshakes", "must be at least 1")
	case c.TLS != nil && len(c.TLS.Certificates) == 0:
		return bad("TLS", "has no certificate")
	case c.TLS != nil && c.TLS.RootCAs == nil:
		return bad("TLS", "has no RootCAs to verify peers against")
	case c.SweepInterval < 0 || c.SweepBudget < 0:
		return bad("SweepInterval/SweepBudget", "must not be negative")
	}
	if _, _, err := net.SplitHostPort(c.RespAddr); err != nil {
		return fmt.Errorf("replication: config: RespAddr: %w", err)
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		return fmt.Errorf("replication: config: RaftAddr: %w", err)
	}
	if c.RaftAdvertise != "" {
		if _, _, err := net.SplitHostPort(c.RaftAdvertise); err != nil {
			return fmt.Errorf("replication: config: RaftAdvertise: %w", err)
		}
	}
	peers, err := splitPeers(c.Join)
	if err != nil {
		return fmt.Errorf("replication: config: Join: %w", err)
	}
	others := 0
	for _, p := range peers {
		if p != c.RespAddr {
			others++
		}
	}
	if c.BootstrapExpect > 1 && others < c.BootstrapExpect-1 {
		return fmt.Errorf("replication: config: BootstrapExpect %d needs the RESP addresses of the %d other nodes in Join (it lists %d)",
			c.BootstrapExpect, c.BootstrapExpect-1, others)
	}
	return nil
}

// splitPeers parses a comma-separated list of host:port addresses (spaces
// around each are ignored); an empty list is nil. Duplicates are dropped.
func splitPeers(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("empty address in %q", list)
		}
		if _, _, err := net.SplitHostPort(p); err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// joinPeers returns the Join addresses (Validate has checked them).
func (c *Config) joinPeers() []string {
	peers, _ := splitPeers(c.Join)
	return peers
}

// bootstrapsAlone reports whether this node may bootstrap a one-node
// cluster (--bootstrap, or --bootstrap-expect 1), subject to the checks of
// bootstrap.go.
func (c *Config) bootstrapsAlone() bool { return c.Bootstrap || c.BootstrapExpect == 1 }

// raftConfig is the one place Config is mapped onto raft's settings. The
// sink behind raft's logger comes back too (nil with RaftLogOutput): the
// node flushes its repeated lines (raftSink.flush).
func (c *Config) raftConfig(log *slog.Logger) (*raft.Config, *raftSink) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	// Group commit already packs many operations into one entry; raft
	// packs up to MaxAppendEntries entries into one disk write and one
	// AppendEntries RPC, and a buffered apply channel lets the submit path
	// queue the next entry while the previous is being written.
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	// A removed node stays up as a quiet non-member: it answers ErrRemoved
	// at once, cannot win a vote (members refuse votes to non-members) and
	// rejoins when added back, without a restart.
	rc.ShutdownOnRemove = false
	level := hclog.LevelFromString(c.RaftLogLevel)
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	if c.RaftLogOutput != nil {
		rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Output: c.RaftLogOutput, Level: level})
		return rc, nil
	}
	sink := newRaftSink(log, level, time.Now)
	rc.Logger = newRaftLogger(sink)
	return rc, sink
}

// validGroupName reports whether name may name a group: 1 to 64 ASCII
// letters, digits, '-', '_' or '.', so that it reads well in replies and
// logs.
func validGroupName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

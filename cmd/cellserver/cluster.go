package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// clusterConfig holds the cluster directives. Cluster mode is on when
// node-id is set.
type clusterConfig struct {
	NodeID        string
	RaftAddr      string
	RaftAdvertise string
	RespAdvertise string
	Bootstrap     bool
	Join          string
	Raft          raftTuning
}

// raftTuning are the replication settings the directives reach (a
// comparable subset of replication.Config).
type raftTuning struct {
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
	NoLeaderTimeout, SnapshotInterval                                    time.Duration
	SnapshotThreshold, TrailingLogs                                      uint64
	MaxBatch, MaxInflight                                                int
	LocalReads                                                           bool
}

func defaultClusterConfig() clusterConfig {
	d := replication.DefaultConfig()
	return clusterConfig{Raft: raftTuning{
		HeartbeatTimeout: d.HeartbeatTimeout, ElectionTimeout: d.ElectionTimeout,
		LeaderLeaseTimeout: d.LeaderLeaseTimeout, CommitTimeout: d.CommitTimeout,
		NoLeaderTimeout: d.NoLeaderTimeout, SnapshotInterval: d.SnapshotInterval,
		SnapshotThreshold: d.SnapshotThreshold, TrailingLogs: d.TrailingLogs,
		MaxBatch: d.MaxBatch, MaxInflight: d.MaxInflight, LocalReads: d.LocalReads,
	}}
}

func (c *clusterConfig) enabled() bool { return c.NodeID != "" }

func setDuration(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("not a positive duration (e.g. 500ms): %q", v)
	}
	*dst = d
	return nil
}

func setUint64(dst *uint64, v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %q", v)
	}
	*dst = n
	return nil
}

func setBool(dst *bool, v string) error {
	switch v {
	case "yes", "true", "1", "":
		*dst = true
	case "no", "false", "0":
		*dst = false
	default:
		return fmt.Errorf("not yes or no: %q", v)
	}
	return nil
}

// clusterDirectives are the cluster settings (flags and config file).
var clusterDirectives = []directive{
	{"node-id", "cluster mode: this node's unique, stable id (empty: standalone)", func(c *Config, v string) error { c.Cluster.NodeID = v; return nil }},
	{"raft-addr", "cluster: host:port of the raft transport", func(c *Config, v string) error { c.Cluster.RaftAddr = v; return nil }},
	{"raft-advertise", "cluster: raft host:port other nodes dial (default: raft-addr)", func(c *Config, v string) error { c.Cluster.RaftAdvertise = v; return nil }},
	{"resp-advertise", "cluster: RESP host:port other nodes forward to (default: bind:port)", func(c *Config, v string) error { c.Cluster.RespAdvertise = v; return nil }},
	{"bootstrap", "cluster: make this node the first member of a new cluster (yes/no)", func(c *Config, v string) error { return setBool(&c.Cluster.Bootstrap, v) }},
	{"join", "cluster: RESP host:port of any member to join through", func(c *Config, v string) error { c.Cluster.Join = v; return nil }},
	{"raft-heartbeat-timeout", "cluster: follower's wait for the leader before an election", func(c *Config, v string) error { return setDuration(&c.Cluster.Raft.HeartbeatTimeout, v) }},
	{"raft-election-timeout", "cluster: candidate's wait per election round", func(c *Config, v string) error { return setDuration(&c.Cluster.Raft.ElectionTimeout, v) }},
	{"raft-lease-timeout", "cluster: leader steps down after this long without a quorum", func(c *Config, v string) error { return setDuration(&c.Cluster.Raft.LeaderLeaseTimeout, v) }},
	{"raft-commit-timeout", "cluster: longest wait before the commit index is sent", func(c *Config, v string) error { return setDuration(&c.Cluster.Raft.CommitTimeout, v) }},
	{"raft-no-leader-timeout", "cluster: how long a command waits for a leader before CLUSTERDOWN", func(c *Config, v string) error { return setDuration(&c.Cluster.Raft.NoLeaderTimeout, v) }},
	{"raft-snapshot-threshold", "cluster: log entries between raft snapshots", func(c *Config, v string) error { return setUint64(&c.Cluster.Raft.SnapshotThreshold, v) }},
	{"raft-snapshot-interval", "cluster: how often to check whether to snapshot", func(c *Config, v string) error { return setDuration(&c.Cluster.Raft.SnapshotInterval, v) }},
	{"raft-trailing-logs", "cluster: log entries kept after a snapshot", func(c *Config, v string) error { return setUint64(&c.Cluster.Raft.TrailingLogs, v) }},
	{"raft-max-batch", "cluster: most operations per raft log entry", func(c *Config, v string) error { return setInt(&c.Cluster.Raft.MaxBatch, v) }},
	{"raft-max-inflight", "cluster: raft entries (or forwarded batches) in flight at once; writes queued meanwhile share the next entry", func(c *Config, v string) error { return setInt(&c.Cluster.Raft.MaxInflight, v) }},
	{"raft-local-reads", "cluster: serve reads from local state without confirming leadership (faster, possibly stale)", func(c *Config, v string) error { return setBool(&c.Cluster.Raft.LocalReads, v) }},
}

// replicationConfig maps the server configuration to the node's.
func (c *Config) replicationConfig(logger *slog.Logger) replication.Config {
	t := c.Cluster.Raft
	rc := replication.DefaultConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = t.HeartbeatTimeout, t.ElectionTimeout
	rc.LeaderLeaseTimeout, rc.CommitTimeout = t.LeaderLeaseTimeout, t.CommitTimeout
	rc.NoLeaderTimeout, rc.SnapshotInterval = t.NoLeaderTimeout, t.SnapshotInterval
	rc.SnapshotThreshold, rc.TrailingLogs = t.SnapshotThreshold, t.TrailingLogs
	rc.MaxBatch, rc.MaxInflight, rc.LocalReads = t.MaxBatch, t.MaxInflight, t.LocalReads
	rc.NodeID = c.Cluster.NodeID
	rc.RaftAddr = c.Cluster.RaftAddr
	rc.RaftAdvertise = c.Cluster.RaftAdvertise
	rc.RespAddr = c.Cluster.RespAdvertise
	if rc.RespAddr == "" {
		rc.RespAddr = c.Addr()
	}
	rc.Password = c.RequirePass
	rc.Bootstrap = c.Cluster.Bootstrap
	rc.Join = c.Cluster.Join
	rc.Dir = filepath.Join(c.Persist.Dir, "raft-"+c.Cluster.NodeID)
	rc.RaftLogOutput = slogWriter{logger}
	return rc
}

// validateCluster checks the cluster directives (only when enabled).
func (c *Config) validateCluster() error {
	if !c.Cluster.enabled() {
		return nil
	}
	if c.Port == 0 && c.Cluster.RespAdvertise == "" {
		return errors.New("cluster mode needs a fixed port (or resp-advertise): other nodes forward to it")
	}
	if h, _, err := net.SplitHostPort(c.Addr()); err == nil && c.Cluster.RespAdvertise == "" {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return errors.New("cluster mode with bind 0.0.0.0 needs resp-advertise")
		}
	}
	rc := c.replicationConfig(nil)
	return rc.Validate()
}

// startCluster opens the raft node over store.
func startCluster(cfg *Config, store *shards.Store, logger *slog.Logger) (*replication.Node, error) {
	rc := cfg.replicationConfig(logger)
	n, err := replication.NewNode(rc, store, logger)
	if err != nil {
		return nil, err
	}
	logger.Info("cluster node started", "node_id", rc.NodeID, "raft", n.RaftAddr(), "resp", rc.RespAddr, "dir", rc.Dir)
	return n, nil
}

// slogWriter turns raft's log lines ("<time> [LEVEL] raft: msg k=v") into
// slog records at the matching level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	if w.l == nil {
		return len(p), nil
	}
	msg := strings.TrimRight(string(p), "\r\n")
	level := slog.LevelInfo
	if i := strings.Index(msg, "["); i >= 0 {
		if j := strings.Index(msg[i:], "]"); j > 0 {
			switch strings.TrimSpace(msg[i+1 : i+j]) {
			case "ERROR":
				level = slog.LevelError
			case "WARN":
				level = slog.LevelWarn
			case "DEBUG", "TRACE":
				level = slog.LevelDebug
			}
			msg = strings.TrimSpace(msg[i+j+1:])
		}
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}

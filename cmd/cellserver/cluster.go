package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/resp"
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
	// Raft is the node's configuration: the directives set its tuning
	// fields directly, and replicationConfig fills in the rest (identity,
	// addresses, directory, credentials, logger).
	Raft replication.Config

	// Node-to-node security on the raft port (docs/cluster.md, Security).
	TLSReplication bool   // tls-replication: mutual TLS with the tls-* files
	TLSCluster     bool   // tls-cluster: the same (one port carries both links)
	Secret         string // cluster-secret; never shown by CONFIG GET
}

// tlsOn reports whether the raft port uses TLS.
func (c *clusterConfig) tlsOn() bool { return c.TLSReplication || c.TLSCluster }

func defaultClusterConfig() clusterConfig {
	return clusterConfig{Raft: replication.DefaultConfig()}
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

// clusterDirectives are the cluster settings (flags and config file).
var clusterDirectives = []directive{
	{"node-id", "cluster mode: this node's unique, stable id (empty: standalone)", func(c *Config, v string) error { c.Cluster.NodeID = v; return nil }},
	{"raft-addr", "cluster: host:port of the raft transport", func(c *Config, v string) error { c.Cluster.RaftAddr = v; return nil }},
	{"raft-advertise", "cluster: raft host:port other nodes dial (default: raft-addr)", func(c *Config, v string) error { c.Cluster.RaftAdvertise = v; return nil }},
	{"resp-advertise", "cluster: RESP host:port other nodes list in ROLE and join through (default: bind:port)", func(c *Config, v string) error { c.Cluster.RespAdvertise = v; return nil }},
	{"bootstrap", "cluster: make this node the first member of a new cluster (yes/no)", func(c *Config, v string) error { return setYesNo(&c.Cluster.Bootstrap, v) }},
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
	{"appendfsync", "cluster: when raft log appends reach the disk: always (before a node counts towards a commit), everysec (written at once, synced every second), no", func(c *Config, v string) error {
		c.Cluster.Raft.AppendFsync = strings.ToLower(v)
		return nil
	}},
	{"raft-log-store", "cluster: raft log store, boltdb or wal (fixed for a node's data directory)", func(c *Config, v string) error {
		c.Cluster.Raft.LogStore = strings.ToLower(v)
		return nil
	}},
	{"raft-local-reads", "cluster: serve reads from local state without confirming leadership (faster, possibly stale)", func(c *Config, v string) error { return setYesNo(&c.Cluster.Raft.LocalReads, v) }},

	// Node-to-node security. Replication and forwarding share the raft
	// port, so tls-replication and tls-cluster both turn TLS on for it.
	{"tls-replication", "cluster: mutual TLS on the raft port (replication and forwarding), with tls-cert-file, tls-key-file and tls-ca-cert-file (yes/no)", func(c *Config, v string) error { return setYesNo(&c.Cluster.TLSReplication, v) }},
	{"tls-cluster", "cluster: the same as tls-replication: both links share the raft port (yes/no)", func(c *Config, v string) error { return setYesNo(&c.Cluster.TLSCluster, v) }},
	{"cluster-secret", "cluster: secret every node shares; a connection to the raft port must prove it knows it (authenticates, does not encrypt)", func(c *Config, v string) error { c.Cluster.Secret = v; return nil }},
}

// replicationConfig maps the server configuration to the node's.
func (c *Config) replicationConfig(logger *slog.Logger) replication.Config {
	rc := c.Cluster.Raft
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
	rc.ClusterSecret = c.Cluster.Secret // rc.TLS is loaded by startCluster
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
		return errors.New("cluster mode needs a fixed port (or resp-advertise): members replicate it for ROLE and new nodes join through it")
	}
	if h, _, err := net.SplitHostPort(c.Addr()); err == nil && c.Cluster.RespAdvertise == "" {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return errors.New("cluster mode with bind 0.0.0.0 needs resp-advertise")
		}
	}
	if c.Cluster.tlsOn() && (c.Ops.TLSCertFile == "" || c.Ops.TLSKeyFile == "" || c.Ops.TLSCACertFile == "") {
		return errors.New("tls-replication/tls-cluster need tls-cert-file, tls-key-file and tls-ca-cert-file (the CA that signs every node's certificate)")
	}
	rc := c.replicationConfig(nil)
	return rc.Validate()
}

// startCluster opens the raft node over store.
func startCluster(cfg *Config, store *shards.Store, logger *slog.Logger) (*replication.Node, error) {
	rc := cfg.replicationConfig(logger)
	if cfg.Cluster.tlsOn() {
		cert, pool, err := cfg.Ops.loadTLSFiles()
		if err != nil {
			return nil, fmt.Errorf("tls-replication: %w", err)
		}
		rc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}
	}
	n, err := replication.NewNode(rc, store, logger)
	if err != nil {
		return nil, err
	}
	logger.Info("cluster node started", "node_id", rc.NodeID, "raft", n.RaftAddr(), "resp", rc.RespAddr, "dir", rc.Dir)
	return n, nil
}

// clusterSettings are the cluster directives CONFIG GET shows (read-only).
func (c *Config) clusterSettings() []resp.Setting {
	t := &c.Cluster.Raft
	return []resp.Setting{
		{Name: "appendfsync", Get: func() string { return t.AppendFsync }},
		{Name: "raft-log-store", Get: func() string { return t.LogStore }},
		{Name: "tls-replication", Get: func() string { return yesNo(c.Cluster.TLSReplication) }},
		{Name: "tls-cluster", Get: func() string { return yesNo(c.Cluster.TLSCluster) }},
		// Shown as set or not, never its value (CONFIG GET is not a way
		// to read the cluster's credentials; SLOWLOG says "(redacted)"
		// for passwords the same way).
		{Name: "cluster-secret", Get: func() string {
			if c.Cluster.Secret == "" {
				return ""
			}
			return "(redacted)"
		}},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
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

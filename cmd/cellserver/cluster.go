package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

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
	Expect        int    // bootstrap-expect
	Join          string // comma-separated RESP addresses
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

// clusterDirectives are the cluster settings (flags and config file).
var clusterDirectives = []directive{
	{name: "node-id", field: func(c *Config) any { return &c.Cluster.NodeID }},
	{name: "group", field: func(c *Config) any { return &c.Cluster.Raft.Group }},
	{name: "raft-addr", field: func(c *Config) any { return &c.Cluster.RaftAddr }},
	{name: "raft-advertise", field: func(c *Config) any { return &c.Cluster.RaftAdvertise }},
	{name: "resp-advertise", field: func(c *Config) any { return &c.Cluster.RespAdvertise }},
	{name: "bootstrap", field: func(c *Config) any { return &c.Cluster.Bootstrap }},
	{name: "bootstrap-expect", field: func(c *Config) any { return &c.Cluster.Expect }},
	{name: "join", field: func(c *Config) any { return &c.Cluster.Join }},
	{name: "raft-heartbeat-timeout", field: func(c *Config) any { return &c.Cluster.Raft.HeartbeatTimeout }},
	{name: "raft-election-timeout", field: func(c *Config) any { return &c.Cluster.Raft.ElectionTimeout }},
	{name: "raft-lease-timeout", field: func(c *Config) any { return &c.Cluster.Raft.LeaderLeaseTimeout }},
	{name: "raft-commit-timeout", field: func(c *Config) any { return &c.Cluster.Raft.CommitTimeout }},
	{name: "raft-no-leader-timeout", field: func(c *Config) any { return &c.Cluster.Raft.NoLeaderTimeout }},
	{name: "raft-snapshot-threshold", field: func(c *Config) any { return &c.Cluster.Raft.SnapshotThreshold }},
	{name: "raft-snapshot-interval", field: func(c *Config) any { return &c.Cluster.Raft.SnapshotInterval }},
	{name: "raft-trailing-logs", field: func(c *Config) any { return &c.Cluster.Raft.TrailingLogs }},
	{name: "raft-max-batch", field: func(c *Config) any { return &c.Cluster.Raft.MaxBatch }},
	{name: "raft-max-inflight", field: func(c *Config) any { return &c.Cluster.Raft.MaxInflight }},
	{name: "appendfsync", field: func(c *Config) any { return &c.Cluster.Raft.AppendFsync }},
	{name: "raft-log-store", field: func(c *Config) any { return &c.Cluster.Raft.LogStore }},
	{name: "raft-local-reads", field: func(c *Config) any { return &c.Cluster.Raft.LocalReads }},
	{name: "raft-cleanup-dead-servers", field: func(c *Config) any { return &c.Cluster.Raft.CleanupDeadServers }},
	{name: "raft-dead-server-timeout", field: func(c *Config) any { return &c.Cluster.Raft.DeadServerTimeout }},
	{name: "cluster-node-timeout", field: func(c *Config) any { return &c.Cluster.Raft.NodeTimeout }},
	{name: "tls-replication", field: func(c *Config) any { return &c.Cluster.TLSReplication }},
	{name: "tls-cluster", field: func(c *Config) any { return &c.Cluster.TLSCluster }},
	{name: "cluster-secret", field: func(c *Config) any { return &c.Cluster.Secret }},
	{name: "raft-handshake-timeout", field: func(c *Config) any { return &c.Cluster.Raft.HandshakeTimeout }},
	{name: "raft-max-handshakes", field: func(c *Config) any { return &c.Cluster.Raft.MaxHandshakes }},
}

// replicationConfig maps the server configuration to the node's.
func (c *Config) replicationConfig() replication.Config {
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
	rc.BootstrapExpect = c.Cluster.Expect
	rc.Join = c.Cluster.Join
	rc.ClusterSecret = c.Cluster.Secret // rc.TLS is loaded by startCluster
	rc.Dir = filepath.Join(c.Persist.Dir, "raft-"+c.Cluster.NodeID)
	return rc
}

// validateCluster checks the cluster directives (only when enabled).
func (c *Config) validateCluster() error {
	if !c.Cluster.enabled() {
		return nil
	}
	// Port 0 is refused by validateOps: nodes talk over the plaintext port.
	if c.InMemory {
		return errors.New(`save "" (in memory only) is for a standalone server: a cluster node keeps its Raft log and snapshots in dir`)
	}
	if h, _, err := net.SplitHostPort(c.Addr()); err == nil && c.Cluster.RespAdvertise == "" {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return errors.New("cluster mode with bind 0.0.0.0 needs resp-advertise")
		}
	}
	if c.Cluster.tlsOn() && (c.Ops.TLSCertFile == "" || c.Ops.TLSKeyFile == "" || c.Ops.TLSCACertFile == "") {
		return errors.New("tls-replication/tls-cluster need tls-cert-file, tls-key-file and tls-ca-cert-file (the CA that signs every node's certificate)")
	}
	rc := c.replicationConfig()
	return rc.Validate()
}

// startCluster opens the raft node over store.
func startCluster(cfg *Config, store *shards.Store, logger *slog.Logger) (*replication.Node, error) {
	rc := cfg.replicationConfig()
	if cfg.Cluster.tlsOn() {
		cert, pool, err := cfg.Ops.loadTLSFiles()
		if err != nil {
			return nil, fmt.Errorf("tls-replication: %w", err)
		}
		rc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}
	}
	rc.OnSetting = cfg.Ops.applySetting(logger)
	n, err := replication.NewNode(rc, store, logger)
	if err != nil {
		return nil, err
	}
	if certs := cfg.Ops.certs; certs != nil && cfg.Cluster.tlsOn() {
		// Rotated certificates reach the raft port too (SIGHUP, CONFIG
		// SET tls-*): new node-to-node connections use them.
		certs.addOnLoad(func(cert tls.Certificate, pool *x509.CertPool) error {
			return n.SetTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool})
		})
	}
	logger.Info("cluster node started", "node_id", rc.NodeID, "raft", n.RaftAddr(), "resp", rc.RespAddr, "dir", rc.Dir)
	return n, nil
}

// yesNo formats a yes/no setting for CONFIG GET.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Package metrics exports cellserver's figures to Prometheus.
//
// A Collector reads, at each scrape, the counters the server keeps anyway
// (the RESP server's per-command counters and latency histograms, the
// keyspace's key and expiry counts, persistence's status, the raft node's
// indexes), so that the hot path is not instrumented a second time. Its
// sources are small interfaces declared here, satisfied by *resp.Server,
// *shards.Store, *snapshot.Persister and *replication.Node.
//
// NewRegistry adds the Go runtime and process collectors (go_*, process_*);
// Listen serves the registry on its own HTTP address, with the probes
// /healthz (the process answers) and /readyz (a Readiness the caller
// passes; RaftReadiness is a cluster member's).
package metrics

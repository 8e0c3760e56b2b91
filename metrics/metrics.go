package metrics

import (
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/serverstats"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/rls"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// Server is the RESP server's counters (*resp.Server satisfies it).
type Server interface {
	Stats() serverstats.Stats
}

// Store is the keyspace (*shards.Store satisfies it).
type Store interface {
	Stats(now int64) shards.Stats
}

// Persistence is standalone persistence (*snapshot.Persister satisfies
// it).
type Persistence interface {
	Stats() snapshot.Stats
}

// Raft is a cluster node (*replication.Node satisfies it).
type Raft interface {
	Info() replication.Info
}

// RateLimitService is Envoy's rate-limit service (*rls.Service satisfies
// it).
type RateLimitService interface {
	Stats() rls.Stats
}

// Sources are what a Collector reads at each scrape. Server and Store are
// required; Persistence, Raft, RLS and Regions are nil when off.
type Sources struct {
	Server      Server
	Store       Store
	Persistence Persistence
	Raft        Raft
	RLS         RateLimitService
	// Regions is the region layer (regions.go); nil without a region.
	Regions Regions
	// Now is the clock Store.Stats is read at (Unix ns); nil uses the
	// system clock.
	Now func() int64
}

// LatencyBuckets returns the upper bounds (seconds) of the command
// duration histogram: 5 µs to 1 s. The server's own histogram is finer
// (12.5% buckets); each of its buckets is counted under the first bound at
// or above its upper edge.
func LatencyBuckets() []float64 {
	return []float64{
		5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
		1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,
	}
}

// Collector is a prometheus.Collector that reads the server's own
// counters at each scrape: the hot path is not instrumented twice. It is
// safe for concurrent scrapes.
type Collector struct {
	src     Sources
	buckets []float64
	// descs lists every description below, in creation order, for
	// Describe.
	descs []*prometheus.Desc

	commands, duration, errorReplies                        *prometheus.Desc
	clients, connsReceived, connsRejected, clientsClosed    *prometheus.Desc
	clientsMem, clientsMemMax                               *prometheus.Desc
	keys, expired, datasetBytes, usedBytes, maxBytes, oom   *prometheus.Desc
	evicted, slowlogLen                                     *prometheus.Desc
	authFailures, protectedDenied, tlsFailures              *prometheus.Desc
	policy, violations                                      *prometheus.Desc
	hotKeys                                                 *prometheus.Desc
	snapOK, snapInProgress, snapLastTime, snapLastDuration  *prometheus.Desc
	snapSaves, snapChanges, snapLastKeys, snapLastBytes     *prometheus.Desc
	raftState, raftTerm, raftCommit, raftApplied, raftLast  *prometheus.Desc
	raftLeaderChanges, raftMembers, raftReady, raftBatchOps *prometheus.Desc
	raftEntries, buildInfo                                  *prometheus.Desc
	raftMemberHealth, raftMemberSilence                     *prometheus.Desc
	raftPortHandshakes, raftPortAccepted, raftPortRefused   *prometheus.Desc
	rlsRequests, rlsOverLimit, rlsShadow, rlsErrors         *prometheus.Desc
	rlsReloads, rlsForwarded, rlsRedirected, rlsUndecided   *prometheus.Desc
	rlsDescHits, rlsDescOver, rlsDescNear, rlsDescShadow    *prometheus.Desc
	classDecisions                                          *prometheus.Desc
	waiting, waitDuration                                   *prometheus.Desc
	leasesHeld, leasesExpired                               *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector over src; src.Server and src.Store must
// not be nil.
func NewCollector(src Sources) *Collector {
	if src.Now == nil {
		src.Now = func() int64 { return time.Now().UnixNano() }
	}
	var descs []*prometheus.Desc
	d := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc("cellserver_"+name, help, labels, nil)
		descs = append(descs, desc)
		return desc
	}
	c := &Collector{
		src:           src,
		buckets:       LatencyBuckets(),
		commands:      d("commands_total", "Commands by name and outcome: allowed or limited (limiter decisions), ok (other commands that succeeded), error (ran and answered an error), rejected (refused before running: unknown subcommand, arity, NOAUTH).", "cmd", "outcome"),
		duration:      d("command_duration_seconds", "Execution time of commands (a pipelined run of limiter writes shares its time evenly).", "cmd"),
		errorReplies:  d("error_replies_total", "Error replies sent, including protocol errors."),
		clients:       d("connected_clients", "Client connections open."),
		connsReceived: d("connections_received_total", "Client connections accepted."),
		connsRejected: d("connections_rejected_total", "Client connections refused because maxclients was reached or by protected mode."),
		clientsClosed: d("clients_closed_total", "Clients closed by a limit: query_buffer (client-query-buffer-limit), query_timeout (client-query-timeout), output_buffer (client-output-buffer-limit), maxmemory_clients (evicted: the clients' memory passed maxmemory-clients and this client used the most) or auth_failures (too many failed AUTH attempts).", "reason"),
		clientsMem:    d("clients_memory_bytes", "Memory the connected clients hold in query buffers, queued transactions and replies (INFO mem_clients_normal), compared with maxmemory-clients."),
		clientsMemMax: d("maxmemory_clients_bytes", "The maxmemory-clients bound in force (0: none)."),
		keys:          d("keys", "Keys held, by limiter kind (including expired keys not yet reclaimed).", "kind"),
		expired:       d("expired_keys_total", "Expired keys reclaimed, by limiter kind.", "kind"),
		datasetBytes:  d("keyspace_allocated_bytes", "Memory the keyspace's tables hold, spare capacity included (INFO used_memory_dataset)."),
		usedBytes:     d("keyspace_used_bytes", "Memory the live keys need: the figure maxmemory is compared with."),
		maxBytes:      d("maxmemory_bytes", "The maxmemory setting (0: no limit)."),
		oom:           d("maxmemory_refusing", "1 while the noeviction policy refuses writes that would add or grow a key."),
		evicted:       d("evicted_keys_total", "Keys deleted by the volatile-ttl maxmemory policy."),
		slowlogLen:    d("slowlog_length", "Entries in the slow log."),
		leasesHeld:    d("leases_held", "Leases the in-flight (CC.ACQUIRE) keys hold, including expired ones not yet reclaimed."),
		leasesExpired: d("leases_expired_total", "Leases freed because their ttl passed without CC.RELEASE or CC.RENEW (a holder that crashed or forgot to release)."),

		authFailures:    d("auth_failures_total", "Failed AUTH and HELLO AUTH attempts (INFO acl_access_denied_auth)."),
		protectedDenied: d("protected_mode_rejected_connections_total", "Client connections of other hosts refused by protected mode (no password set)."),
		hotKeys:         d("hotkey_count", "Estimated limiter requests (list requested) or limited decisions (list limited) on each of the 10 most counted keys of the heavy-hitter summaries since they started (hotkeys-capacity); at most 20 series.", "list", "cmd", "key"),
		tlsFailures:     d("tls_handshake_failures_total", "TLS handshakes on tls-port that failed (a connection closed before sending anything is not counted)."),
		policy:          d("limit_policy_requests_total", "Limiter requests changed by the rules: overridden (a limit-override rule replaced the parameters; counted by the node that received the request), shadow (sent as limit-shadow; idem), shadow_limited (a shadow request that would have been limited and was answered allowed; counted where applied, the same on every node of a group).", "outcome"),
		violations:      d("violations_log_lines_total", "Violations log lines written (logged) and limited decisions left out over violations-log-rate (suppressed).", "outcome"),

		snapOK:           d("snapshot_last_status_ok", "1 if the last save succeeded, 0 if it failed."),
		snapInProgress:   d("snapshot_in_progress", "1 while a background save runs."),
		snapLastTime:     d("snapshot_last_success_timestamp_seconds", "Unix time of the last successful save (start-up before any)."),
		snapLastDuration: d("snapshot_last_duration_seconds", "Duration of the last save attempt."),
		snapSaves:        d("snapshot_saves_total", "Successful saves since start."),
		snapChanges:      d("snapshot_changes_since_last_save", "Writes that changed the keyspace since the last successful save."),
		snapLastKeys:     d("snapshot_last_keys", "Keys written by the last successful save."),
		snapLastBytes:    d("snapshot_last_bytes", "Size of the last snapshot written."),

		raftState:         d("raft_state", "1 for this node's raft state (leader, follower, candidate, shutdown, removed).", "state"),
		raftTerm:          d("raft_term", "Current raft term."),
		raftCommit:        d("raft_commit_index", "Raft commit index."),
		raftApplied:       d("raft_applied_index", "Raft applied index."),
		raftLast:          d("raft_last_log_index", "Last raft log index."),
		raftLeaderChanges: d("raft_leader_changes_total", "Leader changes this node observed."),
		raftMembers:       d("raft_members", "Members of the raft configuration, by suffrage.", "suffrage"),
		raftReady:         d("raft_leader_ready", "1 on a leader that serves commands."),
		raftMemberHealth:  d("raft_member_health", "On the leader: 1 for each member's health verdict (online, loading, pfail, fail), the one CLUSTER NODES, CLUSTER SHARDS and INFO replication show.", "member", "health"),
		raftMemberSilence: d("raft_member_last_contact_seconds", "On the leader: seconds since each member last answered its status request (since the leader began asking, when it never did).", "member"),
		raftEntries:       d("raft_entries_submitted_total", "Command entries this node submitted as leader."),
		raftBatchOps:      d("raft_ops_submitted_total", "Operations those entries carried (ops/entries is the group-commit batch size)."),
		buildInfo:         d("build_info", "Always 1; the labels name the version.", "version", "goversion"),

		raftPortHandshakes: d("raft_port_handshakes", "Inbound raft-port handshakes under way."),
		raftPortAccepted:   d("raft_port_accepted_total", "Inbound raft-port connections that completed the handshake."),
		raftPortRefused:    d("raft_port_refused_total", "Inbound raft-port connections closed without completing the handshake: full (every slot held by a peer that sent its first message), evicted (closed before sending its first message, to make room), timeout (handshake not complete within raft-handshake-timeout), handshake (wrong cluster secret, unknown header, TLS failure, closed by the peer).", "reason"),

		rlsRequests:   d("rls_requests_total", "ShouldRateLimit calls the rate-limit service answered (errors included)."),
		rlsOverLimit:  d("rls_over_limit_total", "ShouldRateLimit calls answered OVER_LIMIT."),
		rlsShadow:     d("rls_shadow_over_limit_total", "Descriptors over their limit under a shadow_mode rule (answered OK)."),
		rlsErrors:     d("rls_errors_total", "ShouldRateLimit calls answered with a gRPC error."),
		rlsReloads:    d("rls_config_loads_total", "Rate-limit service configuration loads: ok, or refused (the previous configuration kept).", "outcome"),
		rlsForwarded:  d("rls_forwarded_descriptors_total", "Descriptors the rate-limit service sent to be decided in another group than this node's."),
		rlsRedirected: d("rls_redirected_descriptors_total", "Descriptors routed again because the group asked no longer served their key (the slot moved or migrates)."),
		rlsDescHits:   d("rls_descriptor_hits_total", "Hits (hits_addend) of the rate-limit service's decided descriptors that have a limit, by domain and descriptor (the rule's path, key_value.key); the first rls-stats-limit pairs, later ones under _overflow.", "domain", "descriptor"),
		rlsDescOver:   d("rls_descriptor_over_limit_total", "Hits over their limit, shadow-mode ones included, by domain and descriptor.", "domain", "descriptor"),
		rlsDescNear:   d("rls_descriptor_near_limit_total", "Hits allowed that left at most 20% of the limit remaining, by domain and descriptor.", "domain", "descriptor"),
		rlsDescShadow: d("rls_descriptor_shadow_over_limit_total", "Hits over the limit of a shadow_mode rule (answered OK), by domain and descriptor.", "domain", "descriptor"),
		rlsUndecided:  d("rls_undecided_descriptors_total", "Descriptors that could not be decided (no leader in their group, no group serving their slot, an error on their key): answered UNKNOWN, or their call failed."),

		waiting:      d("waiting_requests", "Limiter requests waiting for their turn (WAIT) on this server now (INFO blocked_clients)."),
		waitDuration: d("wait_duration_seconds", "How long the requests that waited (WAIT) waited, from their admission to their reply."),

		classDecisions: d("class_decisions_total", "Limiter decisions by key class and outcome (allowed, limited): the first metrics-class rule matching the key, else its prefix up to the first ':' for the first metrics-class-limit prefixes, else other; a CL.THROTTLEALL counts each of its keys. Absent while classes are off.", "class", "outcome"),
	}
	c.descs = descs
	return c
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the sources and sends the metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.buildInfo, 1, resp.Version, goVersion())

	st := c.src.Server.Stats()
	for i := range st.Commands {
		cs := &st.Commands[i]
		name := cs.Name
		if cs.Limiter {
			counter(c.commands, float64(cs.Allowed), name, "allowed")
			counter(c.commands, float64(cs.Limited), name, "limited")
		} else {
			counter(c.commands, float64(max(cs.Calls-cs.Failed, 0)), name, "ok")
		}
		counter(c.commands, float64(cs.Failed), name, "error")
		counter(c.commands, float64(cs.Rejected), name, "rejected")
		if cs.Latency.Count > 0 {
			buckets := make(map[float64]uint64, len(c.buckets))
			for _, b := range c.buckets {
				buckets[b] = cs.Latency.CountAtMost(time.Duration(b * 1e9))
			}
			ch <- prometheus.MustNewConstHistogram(c.duration, cs.Latency.Count, cs.Latency.Sum.Seconds(), buckets, name)
		}
	}
	counter(c.errorReplies, float64(st.ErrorReplies))
	gauge(c.clients, float64(st.ConnectedClients))
	counter(c.connsReceived, float64(st.ConnectionsReceived))
	counter(c.connsRejected, float64(st.RejectedConnections))
	counter(c.clientsClosed, float64(st.QueryBufferClosed), "query_buffer")
	counter(c.clientsClosed, float64(st.QueryTimeoutClosed), "query_timeout")
	counter(c.clientsClosed, float64(st.AuthClosed), "auth_failures")
	counter(c.clientsClosed, float64(st.OutputBufferClosed), "output_buffer")
	counter(c.clientsClosed, float64(st.EvictedClients), "maxmemory_clients")
	gauge(c.clientsMem, float64(st.ClientMemory))
	gauge(c.clientsMemMax, float64(st.ClientMemoryLimit))
	counter(c.authFailures, float64(st.AuthFailures))
	counter(c.protectedDenied, float64(st.ProtectedModeDenied))
	counter(c.tlsFailures, float64(st.TLSHandshakeFailures))
	counter(c.policy, float64(st.LimitOverridden), "overridden")
	counter(c.policy, float64(st.ShadowRequests), "shadow")
	counter(c.policy, float64(st.ShadowLimited), "shadow_limited")
	counter(c.violations, float64(st.ViolationsLogged), "logged")
	counter(c.violations, float64(st.ViolationsSuppressed), "suppressed")
	for _, k := range st.HotRequested {
		gauge(c.hotKeys, float64(k.Count), "requested", k.Command, strings.ToValidUTF8(k.Key, "\uFFFD"))
	}
	for _, k := range st.HotLimited {
		gauge(c.hotKeys, float64(k.Count), "limited", k.Command, strings.ToValidUTF8(k.Key, "\uFFFD"))
	}
	gauge(c.waiting, float64(st.Wait.Waiting))
	if st.Wait.Waited > 0 {
		buckets := make(map[float64]uint64, len(st.Wait.Bounds))
		var cum uint64
		for i, b := range st.Wait.Bounds {
			cum += uint64(st.Wait.Counts[i])
			buckets[b] = cum
		}
		// The counters are read one by one: a wait answered meanwhile may
		// be in the buckets and not yet in the count.
		ch <- prometheus.MustNewConstHistogram(c.waitDuration, max(uint64(st.Wait.Waited), cum+uint64(st.Wait.Counts[len(st.Wait.Bounds)])), st.Wait.WaitedSeconds, buckets)
	}
	for _, k := range st.Classes {
		counter(c.classDecisions, float64(k.Allowed), k.Name, "allowed")
		counter(c.classDecisions, float64(k.Limited), k.Name, "limited")
	}
	gauge(c.usedBytes, float64(st.UsedMemory))
	gauge(c.maxBytes, float64(st.MaxMemory))
	gauge(c.oom, b2f(st.OOM))
	counter(c.evicted, float64(st.EvictedKeys))
	gauge(c.slowlogLen, float64(st.SlowlogLen))

	ks := c.src.Store.Stats(c.src.Now())
	for k := engine.KindNone + 1; k.Valid(); k++ {
		gauge(c.keys, float64(ks.KeysByKind[k]), k.String())
		counter(c.expired, float64(ks.ExpiredByKind[k]), k.String())
	}
	gauge(c.datasetBytes, float64(ks.Bytes))
	gauge(c.leasesHeld, float64(ks.Leases))
	counter(c.leasesExpired, float64(ks.LeasesExpired))

	if p := c.src.Persistence; p != nil {
		c.collectPersistence(p, gauge, counter)
	}
	if r := c.src.RLS; r != nil {
		s := r.Stats()
		counter(c.rlsRequests, float64(s.Requests))
		counter(c.rlsOverLimit, float64(s.OverLimit))
		counter(c.rlsShadow, float64(s.ShadowOverLimit))
		counter(c.rlsErrors, float64(s.Errors))
		counter(c.rlsReloads, float64(s.Reloads), "ok")
		counter(c.rlsReloads, float64(s.ReloadErrors), "refused")
		counter(c.rlsForwarded, float64(s.Forwarded))
		counter(c.rlsRedirected, float64(s.Redirected))
		counter(c.rlsUndecided, float64(s.Undecided))
		for _, d := range s.Descriptors {
			dom, desc := strings.ToValidUTF8(d.Domain, "\uFFFD"), strings.ToValidUTF8(d.Descriptor, "\uFFFD")
			counter(c.rlsDescHits, float64(d.TotalHits), dom, desc)
			counter(c.rlsDescOver, float64(d.OverLimit), dom, desc)
			counter(c.rlsDescNear, float64(d.NearLimit), dom, desc)
			counter(c.rlsDescShadow, float64(d.ShadowOverLimit), dom, desc)
		}
	}
	if r := c.src.Raft; r != nil {
		inf := r.Info()
		for _, s := range []string{"leader", "follower", "candidate", "shutdown", "removed"} {
			gauge(c.raftState, b2f(inf.State == s), s)
		}
		gauge(c.raftTerm, float64(inf.Term))
		gauge(c.raftCommit, float64(inf.CommitIndex))
		gauge(c.raftApplied, float64(inf.AppliedIndex))
		gauge(c.raftLast, float64(inf.LastLogIndex))
		counter(c.raftLeaderChanges, float64(inf.LeaderChanges))
		var voters, nonvoters int
		for _, m := range inf.Members {
			if m.Voter {
				voters++
			} else {
				nonvoters++
			}
		}
		gauge(c.raftMembers, float64(voters), "voter")
		gauge(c.raftMembers, float64(nonvoters), "nonvoter")
		gauge(c.raftReady, b2f(inf.Ready))
		for _, m := range inf.Members {
			if !m.Health {
				continue
			}
			for _, h := range []cluster.Health{cluster.HealthOnline, cluster.HealthLoading, cluster.HealthSuspect, cluster.HealthFailed} {
				gauge(c.raftMemberHealth, b2f(m.State == h), m.ID, h.String())
			}
			gauge(c.raftMemberSilence, m.Silence.Seconds(), m.ID)
		}
		counter(c.raftEntries, float64(inf.Entries))
		counter(c.raftBatchOps, float64(inf.Ops))
		p := inf.RaftPort
		gauge(c.raftPortHandshakes, float64(p.Handshakes))
		counter(c.raftPortAccepted, float64(p.Accepted))
		counter(c.raftPortRefused, float64(p.RefusedFull), "full")
		counter(c.raftPortRefused, float64(p.Evicted), "evicted")
		counter(c.raftPortRefused, float64(p.TimedOut), "timeout")
		counter(c.raftPortRefused, float64(p.Failed), "handshake")
	}
}

// collectPersistence maps persistence's figures to metrics.
func (c *Collector) collectPersistence(p Persistence, gauge, counter func(*prometheus.Desc, float64, ...string)) {
	st := p.Stats()
	gauge(c.snapOK, b2f(st.LastSaveOK))
	gauge(c.snapInProgress, b2f(st.BGSaveInProgress))
	gauge(c.snapLastTime, float64(st.LastSave.Unix()))
	// Whole milliseconds, as INFO's rdb_last_save_duration_ms.
	gauge(c.snapLastDuration, float64(st.LastSaveDuration.Milliseconds())/1e3)
	counter(c.snapSaves, float64(st.Saves))
	gauge(c.snapChanges, float64(st.ChangesSinceLastSave))
	gauge(c.snapLastKeys, float64(st.LastSaveKeys))
	gauge(c.snapLastBytes, float64(st.LastSaveBytes))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func goVersion() string {
	return strings.TrimPrefix(runtime.Version(), "go")
}

// NewRegistry returns a registry holding a Collector over src, the Go
// runtime collector (go_*: memory, GC, goroutines) and the process
// collector (process_*: RSS, CPU, open file descriptors).
func NewRegistry(src Sources) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if src.Regions != nil {
		reg.MustRegister(newRegionCollector(src.Regions))
	}
	return reg
}

// Handler returns the HTTP handler of /metrics for reg.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: reg})
}

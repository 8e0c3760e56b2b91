package setting

import (
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// Groups are the sections of docs/configuration.md, in order.
var Groups = []string{"server", "limits", "slow log and memory", "tls", "persistence", "cluster", "regions", "rate-limit service"}

// minRaftTimeout is the shortest raft timeout (nanoseconds): raft's own
// floor for its timers.
const minRaftTimeout = int64(5 * time.Millisecond)

// Table is every setting, in --help's order.
var Table = []Spec{
	// server
	{Name: "bind", Kind: String, Default: "127.0.0.1", Group: "server", Help: "address to listen on"},
	{Name: "port", Kind: Int, Min: 0, Max: 65535, Default: "6379", Group: "server", Help: "TCP port to listen on (0: no plaintext port; tls-port must be set)"},
	{Name: "requirepass", Kind: Secret, Live: true, Group: "server", Help: "password clients must AUTH with (empty: none)"},
	{Name: "maxclients", Kind: Int, Min: 1, Max: NoMax, Default: "10000", Live: true, LiveErr: "argument must be an integer of at least 1", Group: "limits", Help: "maximum connected clients (lowered at start-up to what the open files limit allows, less 32 reserved descriptors)"},
	{Name: "timeout", Kind: Int, Min: 0, Max: NoMax, LiveMax: 1 << 31, Default: "0", Live: true, LiveErr: "argument couldn't be parsed into an integer", Group: "limits", Help: "close clients idle for this many seconds (0: never)"},
	{Name: "loglevel", Kind: Enum, Words: []string{"debug", "verbose", "notice", "warning"}, Default: "notice", Live: true, Group: "server", Help: "debug, verbose, notice or warning"},
	{Name: "io-threads", Kind: Int, Min: 0, Max: 1024, Default: "0", Group: "server", Help: "event loops serving plaintext client connections (0: one per CPU from 4 CPUs on, one per two CPUs below, following a container's CPU quota); TLS connections and cluster nodes serve each client on its own goroutine"},
	{Name: "io-event-loops", Kind: YesNo, Default: "yes", Group: "server", Help: "no: serve every client on its own goroutine instead of on event loops (io-threads)"},
	{Name: "shards", Kind: Int, Min: 0, Max: 1024, Default: "0", Group: "server", Help: "keyspace shards, a power of two (0: 16 per CPU, at most 1024)"},
	{Name: "pprof-addr", Kind: String, Group: "server", Help: "host:port to serve Go profiles on at /debug/pprof/ (empty: off); trusted networks only"},
	{Name: "sl-max-limit", Kind: Int, Min: 1, Max: engine.MaxCount, Default: "100000", Group: "limits", Help: "largest SL.ADD limit (a sliding log keeps one entry per request)"},

	// persistence
	{Name: "dir", Kind: String, Default: ".", Group: "persistence", Help: "directory of the snapshot file, and in cluster mode of the Raft data (raft-<node-id>); \"\" is the working directory (to write nothing, see save)"},
	{Name: "dbfilename", Kind: String, Default: "cellserver.snap", Group: "persistence", Help: "snapshot file name inside dir"},
	{Name: "save", Kind: String, Default: "60", Live: true, Group: "persistence", Help: `seconds between automatic background saves while anything changed (0: none; the snapshot is still loaded at start and written at SHUTDOWN and SIGTERM; redis.conf's "<seconds> <changes>" is accepted). "": in memory only (standalone), as Redis's save "": no snapshot is loaded or written and SAVE and BGSAVE answer that persistence is off (chosen at start; CONFIG SET cannot turn persistence on or off)`},
	{Name: "snapshot-ignore-corrupt", Kind: YesNo, Default: "no", Group: "persistence", Help: "yes: move a corrupt snapshot aside and start empty, instead of refusing to start"},

	// cluster
	{Name: "node-id", Kind: String, Group: "cluster", Help: "cluster mode: this node's unique, stable id (empty: standalone)"},
	{Name: "group", Kind: String, Default: "default", Group: "cluster", Help: "cluster: the replication group this node belongs to (1 to 64 letters, digits, '-', '_', '.'); several groups, each owning hash slots, form one Redis Cluster. Nodes of one group share its name; a node of another group is never joined"},
	{Name: "raft-addr", Kind: String, Group: "cluster", Help: "cluster: host:port of the raft transport"},
	{Name: "raft-advertise", Kind: String, Group: "cluster", Help: "cluster: raft host:port other nodes dial (default: raft-addr); a host name is resolved at every connection"},
	{Name: "resp-advertise", Kind: String, Group: "cluster", Help: "cluster: RESP host:port other nodes list in ROLE and join through (default: bind:port)"},
	{Name: "bootstrap", Kind: YesNo, Default: "no", Group: "cluster", Help: "cluster: with no raft state, make this node the only member of a new cluster (yes/no); with join, only once every listed node answered and none belongs to a cluster. Never restart a wiped node with bootstrap yes and no join"},
	{Name: "bootstrap-expect", Kind: Int, Min: 0, Max: NoMax, Default: "0", Group: "cluster", Help: "cluster: with no raft state, form a new cluster of this many nodes (this one included) once every node listed in join answered, without state and with the same number; join a cluster if any belongs to one (0: off). The recommended start for every node"},
	{Name: "join", Kind: String, Group: "cluster", Help: "cluster: comma-separated RESP host:port of the other nodes; a node with no raft state joins through a member among them"},
	{Name: "raft-heartbeat-timeout", Kind: Duration, Min: minRaftTimeout, Max: NoMax, Default: "500ms", Group: "cluster", Help: "cluster: follower's wait for the leader before an election"},
	{Name: "raft-election-timeout", Kind: Duration, Min: minRaftTimeout, Max: NoMax, Default: "500ms", Group: "cluster", Help: "cluster: candidate's wait per election round"},
	{Name: "raft-lease-timeout", Kind: Duration, Min: minRaftTimeout, Max: NoMax, Default: "500ms", Group: "cluster", Help: "cluster: leader steps down after this long without a quorum"},
	{Name: "raft-commit-timeout", Kind: Duration, Min: 1, Max: NoMax, Default: "20ms", Group: "cluster", Help: "cluster: longest wait before the commit index is sent"},
	{Name: "raft-no-leader-timeout", Kind: Duration, Min: 1, Max: NoMax, Default: "3s", Group: "cluster", Help: "cluster: how long a command waits for a leader before CLUSTERDOWN"},
	{Name: "raft-snapshot-threshold", Kind: Int, Min: 1, Max: NoMax, Default: "8192", Group: "cluster", Help: "cluster: log entries between raft snapshots"},
	{Name: "raft-snapshot-interval", Kind: Duration, Min: minRaftTimeout, Max: NoMax, Default: "30s", Group: "cluster", Help: "cluster: how often to check whether to snapshot"},
	{Name: "raft-trailing-logs", Kind: Int, Min: 0, Max: NoMax, Default: "10240", Group: "cluster", Help: "cluster: log entries kept after a snapshot"},
	{Name: "raft-max-batch", Kind: Int, Min: 1, Max: NoMax, Default: "1024", Group: "cluster", Help: "cluster: most operations per raft log entry"},
	{Name: "raft-max-inflight", Kind: Int, Min: 1, Max: NoMax, Default: "2", Group: "cluster", Help: "cluster: raft entries (or forwarded batches) in flight at once; writes queued meanwhile share the next entry"},
	{Name: "appendfsync", Kind: Enum, Words: []string{"always", "everysec", "no"}, Default: "always", Group: "cluster", Help: "cluster: when raft log appends reach the disk: always (before a node counts towards a commit), everysec (written at once, synced every second), no"},
	{Name: "raft-log-store", Kind: Enum, Words: []string{"boltdb", "wal"}, Default: "boltdb", Group: "cluster", Help: "cluster: raft log store, boltdb or wal (fixed for a node's data directory)"},
	{Name: "raft-local-reads", Kind: YesNo, Default: "no", Group: "cluster", Help: "cluster: serve reads from local state without confirming leadership (faster, possibly stale)"},
	{Name: "raft-cleanup-dead-servers", Kind: YesNo, Default: "no", Group: "cluster", Help: "cluster: the leader removes a member it has not reached for raft-dead-server-timeout, only if the remaining voters keep a reachable majority (yes/no)"},
	{Name: "raft-dead-server-timeout", Kind: Duration, Min: int64(time.Second), Max: NoMax, Default: "30s", Group: "cluster", Help: "cluster: how long the leader must fail to reach a member before raft-cleanup-dead-servers removes it"},
	{Name: "cluster-node-timeout", Kind: Duration, Min: int64(time.Millisecond), Max: NoMax, Default: "15s", Group: "cluster", Help: "cluster: how long a member its leader cannot reach shows as fail? (suspected) before it shows as fail in CLUSTER NODES, like Redis's cluster-node-timeout (a duration: 15s, not 15000)"},
	// Node-to-node security. Replication and forwarding share the raft
	// port, so tls-replication and tls-cluster both turn TLS on for it.
	{Name: "tls-replication", Kind: YesNo, Default: "no", Group: "cluster", Help: "cluster: mutual TLS on the raft port (replication and forwarding), with tls-cert-file, tls-key-file and tls-ca-cert-file (yes/no)"},
	{Name: "tls-cluster", Kind: YesNo, Default: "no", Group: "cluster", Help: "cluster: the same as tls-replication: both links share the raft port (yes/no)"},
	{Name: "cluster-secret", Kind: Secret, Group: "cluster", Help: "cluster: secret every node shares; a connection to the raft port must prove it knows it (authenticates, does not encrypt)"},
	{Name: "raft-handshake-timeout", Kind: Duration, Min: int64(10 * time.Millisecond), Max: int64(time.Minute), Default: "1s", Group: "cluster", Help: "cluster: time an inbound raft-port connection has to complete its handshake (TLS and authentication) from being accepted"},
	{Name: "raft-max-handshakes", Kind: Int, Min: 1, Max: 1 << 20, Default: "1024", Group: "cluster", Help: "cluster: most inbound raft-port handshakes under way at once; when all are taken, a new connection closes the oldest that has not sent its first message, from the address with the most under way"},

	// operations
	{Name: "protected-mode", Kind: YesNo, Default: "yes", Live: true, Group: "server", Help: "yes: while requirepass is empty, refuse clients that are not on this host (not loopback, not a unix socket) with a DENIED error"},
	{Name: "metrics-addr", Kind: String, Group: "server", Help: "host:port to serve Prometheus metrics on at /metrics, and the probes /healthz and /readyz (empty: off), e.g. 127.0.0.1:9121"},
	{Name: "metrics-class", Kind: String, Live: true, Repeatable: true, Group: "server", Help: `"NAME PATTERN ...": classes of limiter keys for the decision counters (INFO classes, cellserver_class_decisions_total): a key counts under the first class whose Redis glob PATTERN matches it, else under the prefix of its name up to the first ':' (see metrics-class-limit), else under other. Repeatable: each line adds classes; CONFIG SET replaces them all ("": none). NAME is 1 to 64 letters, digits, '_', '-', '.' (not other). At most 1024 rules, patterns of at most 512 bytes; so never more than 11025 class label values (rules, metrics-class-limit prefixes, other)`},
	{Name: "metrics-class-limit", Kind: Int, Min: 0, Max: 10000, Default: "100", Live: true, LiveErr: "argument must be an integer from 0 to 10000", Group: "server", Help: "how many key prefixes (the name up to its first ':') get a class of their own, the first seen first; later prefixes count under other. With no metrics-class, 0 turns the class counters off"},
	{Name: "tls-port", Kind: Int, Min: 0, Max: 65535, Default: "0", Group: "tls", Help: "TLS port to listen on (0: no TLS); the plaintext port can be turned off with --port 0"},
	{Name: "tls-cert-file", Kind: String, Live: true, Group: "tls", Help: "server certificate (PEM) for TLS, also the raft port's with tls-replication; read again on SIGHUP, and live with tls-port or tls-replication set: CONFIG SET of tls-cert-file, tls-key-file and tls-ca-cert-file (together in one CONFIG SET) loads them for new connections, or changes nothing if they do not load"},
	{Name: "tls-key-file", Kind: String, Live: true, Group: "tls", Help: "server private key (PEM) for TLS; live with tls-port or tls-replication set, as tls-cert-file"},
	{Name: "tls-ca-cert-file", Kind: String, Live: true, Group: "tls", Help: "CA certificates (PEM) that client certificates must chain to; live with tls-port or tls-replication set, as tls-cert-file"},
	{Name: "tls-auth-clients", Kind: Enum, Words: []string{"yes", "no", "optional"}, Default: "yes", Group: "tls", Help: "yes: clients must present a certificate signed by the CA; optional: verified if presented; no: not asked"},
	{Name: "proto-max-bulk-len", Kind: Bytes, Min: 1 << 20, Max: 1 << 40, Default: "512mb", Live: true, LiveErr: "argument must be a memory size of at least 1mb", Group: "limits", Help: "largest argument in bytes (units: 512mb, 1gb)"},
	{Name: "client-query-buffer-limit", Kind: Bytes, Min: 1 << 20, Max: 1 << 40, Default: "1gb", Live: true, LiveErr: "argument must be a memory size of at least 1mb", Group: "limits", Help: "most unparsed input one client may have pending, in bytes (units: 1mb, 1gb)"},
	{Name: "client-query-timeout", Kind: Int, Min: 0, Max: NoMax, LiveMax: 1 << 31, Default: "60", Live: true, LiveErr: "argument couldn't be parsed into an integer", Group: "limits", Help: "seconds a client may take to send the rest of a command it started (0: no limit)"},
	{Name: "client-output-buffer-limit", Kind: String, Default: "normal 64mb 16mb 60", Live: true, Group: "limits", Help: `"<class> <hard> <soft> <soft-seconds>", repeatable: close a client with more than hard bytes of replies pending, or more than soft for soft-seconds (0: no limit); classes replica and pubsub are accepted and ignored`},
	// Transactions (resp/tx.go): a transaction's writes are one raft log
	// entry, so these bound what one entry holds; the defaults keep the
	// largest allowed one well under a second of the group's time
	// (docs/performance.md, "The largest transaction").
	{Name: "transaction-max-commands", Kind: Int, Min: 1, Max: 10_000_000, Default: "10000", Live: true, LiveErr: "argument must be an integer from 1 to 10000000", Group: "limits", Help: "most commands one MULTI may queue; one more is refused at once (the error names this setting) and EXEC answers EXECABORT. A transaction's writes are one replicated log entry, applied as one step, so this bounds how long one client's transaction holds up everyone else's writes"},
	{Name: "transaction-max-bytes", Kind: Bytes, Min: 1 << 10, Max: 256 << 20, Default: "1mb", Live: true, LiveErr: "argument must be a memory size from 1kb to 256mb", Group: "limits", Help: "most argument bytes one MULTI may queue (about the size of its log entry in a cluster); the command past it is refused (the error names this setting) and EXEC answers EXECABORT"},
	{Name: "slowlog-log-slower-than", Kind: Int, Min: NoMin, Max: NoMax, Default: "10000", Live: true, LiveErr: "argument couldn't be parsed into an integer", Group: "slow log and memory", Help: "log commands slower than this many microseconds in SLOWLOG (negative: off, 0: all)"},
	{Name: "slowlog-max-len", Kind: Int, Min: 0, Max: NoMax, LiveMax: 1 << 31, Default: "128", Live: true, LiveErr: "argument must be a non-negative integer", Group: "slow log and memory", Help: "SLOWLOG entries kept"},
	{Name: "maxmemory", Kind: Bytes, Min: 0, Max: NoMax, Default: "0", Live: true, LiveErr: "argument must be a memory size (e.g. 100mb)", Group: "slow log and memory", Help: "bound on the keyspace's memory in bytes (units: 100mb, 1gb; 0: none)"},
	{Name: "hotkeys-capacity", Kind: Int, Min: 0, Max: 1 << 20, Default: "1024", Live: true, LiveErr: "argument must be an integer from 0 to 1048576", Group: "slow log and memory", Help: "keys each heavy-hitter summary tracks (LIMITER TOP, OBJECT FREQ, INFO hotkeys): about 132 bytes a key, two summaries (requested and limited); a change starts both anew (0: off)"},
	{Name: "limit-override", Kind: String, Live: true, Repeatable: true, Group: "limits", Help: `"<pattern> <burst> <rate> <period>", repeatable (first match wins): limiter requests on keys matching the Redis glob take these parameters instead of the caller's: burst replaces max_burst, capacity or limit, rate replaces count_per_period, refill_tokens or leak_count (ignored by the window limiters), period (seconds, or a duration such as 500ms) replaces period, refill or leak period, or window; for CC.ACQUIRE burst replaces max and nothing else applies; quantity and INTERVAL stay the caller's. At most 1024 rules, patterns of at most 512 bytes. Cluster: replicated, set on the group's leader (docs/operations.md)`},
	{Name: "limit-shadow", Kind: String, Live: true, Repeatable: true, Group: "limits", Help: "\"<pattern> ...\", repeatable: limiter requests on keys matching a Redis glob answer allowed when they would have been limited (nothing is consumed, as for a refusal), counted in INFO stats shadow_limited and in metrics. At most 1024 patterns of at most 512 bytes. Cluster: replicated, as limit-override"},
	// waiting instead of refusing (WAIT; resp/wait.go)
	{Name: "max-wait", Kind: Duration, Min: int64(time.Millisecond), Max: engine.MaxWait, Default: "10s", Live: true, Group: "limits", Help: "longest WAIT a limiter request may ask for, 1ms up to 1d; a longer one waits this long at most. CONFIG SET takes a duration as WAIT does (500ms, 10s; a bare integer is seconds)"},
	{Name: "max-waiting", Kind: Int, Min: 0, Max: 1 << 30, Default: "100000", Live: true, LiveErr: "argument must be an integer from 0 to 1073741824", Group: "limits", Help: "most requests waiting (WAIT) on this server at once, about 100 bytes each; a request with WAIT beyond it answers an error naming this setting and consumes nothing (0: WAIT is refused)"},
	{Name: "violations-log", Kind: YesNo, Default: "no", Live: true, Group: "limits", Help: "yes: log limited decisions (key, command, node, time) at notice level, at most violations-log-rate lines a second"},
	{Name: "violations-log-rate", Kind: Int, Min: 1, Max: 1 << 20, Default: "10", Live: true, LiveErr: "argument must be an integer from 1 to 1048576", Group: "limits", Help: "most violations-log lines a second; the first line after a second that dropped some carries suppressed=<n>"},
	{Name: "maxmemory-policy", Kind: Enum, Words: []string{"noeviction", "volatile-ttl"}, Default: "noeviction", Live: true, Group: "slow log and memory", Help: "over maxmemory: noeviction (creating or growing a key answers OOM: fail closed) or volatile-ttl (evict keys nearest expiry: fail open)"},
	{Name: "maxmemory-clients", Kind: String, Default: "auto", Live: true, Group: "slow log and memory", Help: `bound on the memory all clients hold together: query buffers beyond a connection's first 16 KiB, parsed arguments, queued transactions, reply buffers and pending replies (INFO memory mem_clients_normal; CLIENT LIST tot-mem); past it the clients using the most are disconnected, as Redis 7's client eviction (INFO stats evicted_clients), except those with CLIENT NO-EVICT on. A memory size (64mb), a percentage of maxmemory (10%; none while maxmemory is 0), 0 (no bound) or auto: half of maxmemory from 16mb to 1gb, and 1gb without maxmemory; at least 128kb`},

	// regions (package region; docs/regions.md)
	{Name: "region", Kind: String, Group: "regions", Help: "this region's name (1 to 64 letters, digits, '-', '_', '.'); every region of a deployment has its own. Empty: regions off, every key limited by this deployment alone"},
	{Name: "region-peer", Kind: String, Group: "regions", Help: `"NAME HOST:PORT[,HOST:PORT...]", repeatable: another region, by the RESP addresses of any of its nodes (tried in turn; MOVED is followed, so one address per group is enough). With tls-replication yes the links are mutual TLS with tls-cert-file and tls-key-file, trusting tls-ca-cert-file, and the addresses are the peers' tls-port (certificates are read at start)`},
	{Name: "region-peer-password", Kind: Secret, Group: "regions", Help: `"NAME PASSWORD", repeatable: the requirepass of peer region NAME, sent with AUTH on every link to it (none: no AUTH)`},
	{Name: "region-policy", Kind: String, Live: true, Group: "regions", Help: `"PATTERN MODE", repeatable, first match wins: keys matching the Redis glob PATTERN are decided in MODE: local (each region alone), split (each region enforces its share of the limit, see region-weight), async (decided here at once; what was consumed is shipped to every peer every region-sync-interval and applied there exactly once) or "global HOME" (decided in region HOME only; the others forward each request there). A key matching no rule is local. CONFIG SET replaces the whole list (rules separated by spaces). At most 1024 rules, patterns of at most 512 bytes`},
	{Name: "region-weight", Kind: String, Group: "regions", Help: `"NAME W", repeatable: region NAME's weight in split keys, 1 to 1048576; a region's share of a split key's limit is its weight over the sum of every region's (unnamed regions weigh 1)`},
	{Name: "region-unreachable", Kind: Enum, Words: []string{"error", "local", "deny"}, Default: "error", Group: "regions", Help: "what a global key answers when its home region does not answer within region-timeout: error (an error naming the region), local (decided here alone, with its whole limit) or deny (refused, nothing consumed)"},
	{Name: "region-sync-interval", Kind: Duration, Min: int64(time.Millisecond), Max: int64(time.Hour), Default: "100ms", Group: "regions", Help: "how often the consumption of async keys is shipped to each peer region (a batch not acknowledged is sent again, and applied once), and how often a CC.ACQUIRE … WAIT in a global key's line at another region asks its home whether it was granted"},
	{Name: "region-backlog-bytes", Kind: Bytes, Min: 1 << 10, Max: 1 << 40, Default: "16mb", Group: "regions", Help: "async consumption queued for one peer region at most (its keys plus 64 bytes each; repeated consumption of one key merges), e.g. while it is cut off; beyond it new consumption is dropped and counted in INFO regions"},
	{Name: "region-timeout", Kind: Duration, Min: int64(time.Millisecond), Max: int64(time.Minute), Default: "1s", Group: "regions", Help: "how long a forwarded decision waits for its home region (connecting, sending, answering) before the region counts as unreachable; an unreachable region is tried again 250ms later, answering per region-unreachable meanwhile"},

	// rate-limit service (Envoy's gRPC API; package rls)
	{Name: "rls-port", Kind: Int, Min: 0, Max: 65535, Default: "0", Group: "rate-limit service", Help: "TCP port serving Envoy's rate-limit service (envoy.service.ratelimit.v3) over gRPC (0: off); TLS with tls-cert-file and tls-auth-clients when tls-port is set"},
	{Name: "rls-config", Kind: String, Live: true, Group: "rate-limit service", Help: "directory of the rate-limit service's rules: envoyproxy/ratelimit YAML files (*.yaml, *.yml), reloaded when they change, on SIGHUP and on CONFIG SET; a bad file is refused and the rules in force stay (empty: no rules, every descriptor OK)"},
	{Name: "rls-reflection", Kind: YesNo, Default: "no", Group: "rate-limit service", Help: "yes: the rate-limit service also answers gRPC server reflection (grpc.reflection.v1), so grpcurl and similar tools can list and call it without its .proto files"},
	{Name: "rls-stats-limit", Kind: Int, Min: 1, Max: 100000, Default: "1000", Group: "rate-limit service", Help: "how many domain and descriptor pairs the rate-limit service counts on their own (INFO rls, cellserver_rls_descriptor_*), the first seen first; later ones count under domain and descriptor _overflow"},
	// Secrets read from files, so that they never stand on a command line
	// (visible in ps, /proc/PID/cmdline and /debug/pprof/cmdline): each
	// names the secret setting it fills (FileOf).
	{Name: "requirepass-file", Kind: String, FileOf: "requirepass", Group: "server", Help: "file holding requirepass: its content, less trailing newlines, is the password (a Kubernetes Secret mounted as a file, a compose secret, a systemd credential). Read once at start; an empty or unreadable file stops the start with an error naming it. Not with requirepass"},
	{Name: "cluster-secret-file", Kind: String, FileOf: "cluster-secret", Group: "cluster", Help: "cluster: file holding cluster-secret, read as requirepass-file. Not with cluster-secret"},
	{Name: "region-peer-password-file", Kind: String, FileOf: "region-peer-password", Repeatable: true, Group: "regions", Help: `"NAME PATH", repeatable: the requirepass of peer region NAME read from the file PATH, as requirepass-file (not with a region-peer-password for the same region)`},

	{Name: "rls-response-headers", Kind: Enum, Words: []string{"off", "ietf", "legacy"}, Default: "off", Live: true, Group: "rate-limit service", Help: "headers the rate-limit service asks Envoy to add: off, ietf (RateLimit, RateLimit-Policy) or legacy (X-RateLimit-Limit, -Remaining, -Reset); Retry-After too when over the limit"},
}

// TypeText describes s's kind and range for the docs.
func (s *Spec) TypeText() string {
	if s.FileOf != "" {
		return "path"
	}
	switch s.Kind {
	case Secret:
		return "secret"
	case YesNo:
		return "yes/no"
	case Enum:
		return orList(s.Words)
	case Duration:
		if s.Min > 1 {
			return "duration ≥ " + s.format(s.Min)
		}
		return "duration"
	case Int, Bytes:
		t := "integer"
		if s.Kind == Bytes {
			t = "bytes"
		}
		switch {
		case s.Min == NoMin && s.Max == NoMax:
			return t
		case s.Max == NoMax:
			return t + " ≥ " + s.format(s.Min)
		}
		return t + " " + s.format(s.Min) + ".." + s.format(s.Max)
	}
	return "string"
}

// Usage is --help's text for s: its help, type and default.
func (s *Spec) Usage() string {
	var extra []string
	if s.Kind != String {
		extra = append(extra, s.TypeText())
	}
	if s.Default != "" {
		extra = append(extra, "default "+s.Default)
	}
	if len(extra) == 0 {
		return s.Help
	}
	return s.Help + " [" + strings.Join(extra, "; ") + "]"
}

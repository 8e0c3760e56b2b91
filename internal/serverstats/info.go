package serverstats

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

// Info is what INFO reports: the server's counters and the state of its
// parts at one instant, gathered by the server (resp) and formatted by
// Append. The parts of a section nobody asked for may be left zero.
type Info struct {
	// Stats are the counters; for INFO, Commands holds every command of
	// the table in table order, called or not.
	Stats
	// Now is the instant of the report, Unix nanoseconds; Started the
	// server's start (rdb_last_save_time when nothing is persisted).
	Now, Started int64
	// UptimeSeconds is how long the server has run.
	UptimeSeconds int64
	// Process is the Go process's facts (ReadProcess).
	Process Process
	// RedisVersion is the protocol level answered as; Version
	// cellserver's.
	RedisVersion, Version string
	// Cluster is true in a replication group (redis_mode cluster,
	// cluster_enabled 1).
	Cluster bool
	// Port is the port setting; ConfigFile the file the server started
	// from.
	Port, ConfigFile string
	// MaxClients is the maxclients setting.
	MaxClients int64
	// Keyspace is the store's statistics at Now; Changes the writes since
	// the store was made (when nothing is persisted).
	Keyspace Keyspace
	Changes  uint64
	// MaxMemoryPolicy is the maxmemory-policy setting's name.
	MaxMemoryPolicy string
	// Persistence, Replication and Regions are those sections' fields as
	// their owners word them; nil: nothing persisted, a lone master, no
	// region.
	Persistence, Replication, Regions [][2]string
	// LimitOverrides and LimitShadows are the limit-override and
	// limit-shadow rules in force.
	LimitOverrides, LimitShadows int
	// WaitLines are the Stats section's lines of the waiting requests,
	// "name:value\r\n" each, as the waiting queue writes them.
	WaitLines []byte
	// Hotkeys is the heavy-hitter summaries' state (Capacity 0: off).
	Hotkeys Hotkeys
	// ClassRules and ClassLimit are the metrics-class and
	// metrics-class-limit settings; ClassPrefixes the prefixes the classes
	// learned (0 while off).
	ClassRules, ClassLimit, ClassPrefixes int
	// Extra are sections of parts wired beside the server, printed after
	// the built-in ones by INFO all, everything or their name.
	Extra []Section
}

// Keyspace is what INFO reports of the store (shards' Store.Stats, whose
// fields these are).
type Keyspace struct {
	// Keys is the number of keys held (expired ones not yet reclaimed
	// included); KeysByKind the same by limiter kind, indexed by
	// engine.Kind.
	Keys       int64
	KeysByKind [8]int64
	// Expired counts the expired keys reclaimed since the store was made.
	Expired uint64
	// Leases is the leases the concurrency keys hold; LeasesExpired those
	// freed because their ttl passed.
	Leases        int64
	LeasesExpired uint64
	// Bytes approximates the store's memory; AvgTTL is the mean time to
	// live left of a sample of keys, in milliseconds.
	Bytes, AvgTTL int64
}

// Hotkeys is the state of the heavy-hitter summaries; their top keys are
// Stats.HotRequested and HotLimited.
type Hotkeys struct {
	// Capacity is hotkeys-capacity; MemoryBytes what both summaries hold.
	Capacity, MemoryBytes int
	// Sample is the sampling (one decision in Sample recorded);
	// RequestedSampled and LimitedSampled the decisions recorded.
	Sample                           int
	RequestedSampled, LimitedSampled uint64
}

// Process is the facts of the Go process INFO reports.
type Process struct {
	// HeapAlloc, Sys and HeapReleased are runtime.MemStats' (bytes); NumGC
	// its GC cycles.
	HeapAlloc, Sys, HeapReleased uint64
	NumGC                        uint32
	PID, MaxProcs, Goroutines    int
	Executable                   string
}

// ReadProcess reads the process's facts (runtime.ReadMemStats: a short
// stop of the world).
func ReadProcess() Process {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	exe, _ := os.Executable()
	return Process{HeapAlloc: m.HeapAlloc, Sys: m.Sys, HeapReleased: m.HeapReleased, NumGC: m.NumGC,
		PID: os.Getpid(), MaxProcs: runtime.GOMAXPROCS(0), Goroutines: runtime.NumGoroutine(), Executable: exe}
}

// Section is an INFO section of a part wired beside the server: printed
// by INFO all, everything, or its name.
type Section struct {
	// Name is the section's name, lower case ("rls"); its title is Name
	// with a capital.
	Name string
	// Fields returns the section's lines; a Value must hold no line end.
	// Called on the INFO command's connection, concurrently with serving.
	Fields func() []Field
}

// Field is one "name:value" line of INFO.
type Field struct {
	Name, Value string
}

// section is a built-in INFO section: its name, whether INFO with no
// argument (or "default") prints it, and its writer.
type section struct {
	name      string
	isDefault bool
	appendTo  func(b []byte, in *Info) []byte
}

// sections lists the built-in sections in the order Redis prints them.
// The default set leaves out commandstats, as Redis does, and
// latencystats, as Redis 7 does.
var sections = []section{
	{"server", true, appendServer},
	{"clients", true, appendClients},
	{"memory", true, appendMemory},
	{"persistence", true, appendPersistence},
	{"stats", true, appendStats},
	{"replication", true, appendReplication},
	{"cpu", true, appendCPU},
	{"cluster", true, appendCluster},
	{"keyspace", true, appendKeyspace},
	{"commandstats", false, appendCommandstats},
	{"latencystats", false, appendLatencystats},
	{"hotkeys", false, appendHotkeys},
	{"classes", false, appendClasses},
	{"regions", false, appendRegions},
}

// Selection is the sections INFO's arguments ask for.
type Selection struct {
	all, def bool
	names    map[string]bool
}

// Select reads INFO's arguments (after the command's name): section
// names, "default" (also when there are none), "all" or "everything",
// in any case.
func Select(args [][]byte) Selection {
	sel := Selection{def: len(args) == 0, names: map[string]bool{}}
	for _, a := range args {
		sel.names[strings.ToLower(string(a))] = true
	}
	sel.all = sel.names["all"] || sel.names["everything"]
	sel.def = sel.def || sel.names["default"]
	return sel
}

// Wants reports whether the built-in section name is selected.
func (sel Selection) Wants(name string) bool {
	for _, s := range sections {
		if s.name == name {
			return sel.all || sel.names[name] || sel.def && s.isDefault
		}
	}
	return false
}

// Append appends the selected sections of in to b, separated by an empty
// line: INFO's bulk reply.
func Append(b []byte, in *Info, sel Selection) []byte {
	start := len(b)
	sep := func() {
		if len(b) > start {
			b = append(b, "\r\n"...)
		}
	}
	for _, s := range sections {
		if sel.Wants(s.name) {
			sep()
			b = s.appendTo(b, in)
		}
	}
	for _, s := range in.Extra {
		if !(sel.all || sel.names[s.Name]) {
			continue
		}
		sep()
		b = title(b, strings.ToUpper(s.Name[:1])+s.Name[1:])
		for _, f := range s.Fields() {
			b = AppendField(b, f.Name, f.Value)
		}
	}
	return b
}

func title(b []byte, t string) []byte {
	b = append(b, "# "...)
	b = append(b, t...)
	return append(b, "\r\n"...)
}

// AppendField appends the line "name:value".
func AppendField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = append(b, value...)
	return append(b, "\r\n"...)
}

// AppendInt appends the line "name:v".
func AppendInt(b []byte, name string, v int64) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendInt(b, v, 10)
	return append(b, "\r\n"...)
}

func appendPairs(b []byte, fields [][2]string) []byte {
	for _, f := range fields {
		b = AppendField(b, f[0], f[1])
	}
	return b
}

// appendServer: versions, process and uptime.
func appendServer(b []byte, in *Info) []byte {
	b = title(b, "Server")
	b = AppendField(b, "redis_version", in.RedisVersion)
	b = AppendField(b, "cellserver_version", in.Version)
	mode := "standalone"
	if in.Cluster {
		mode = "cluster" // CLUSTER answers: clients may use cluster mode
	}
	b = AppendField(b, "redis_mode", mode)
	b = AppendField(b, "os", runtime.GOOS+" "+runtime.GOARCH)
	b = AppendInt(b, "arch_bits", strconv.IntSize)
	b = AppendField(b, "go_version", runtime.Version())
	b = AppendInt(b, "process_id", int64(in.Process.PID))
	b = AppendField(b, "tcp_port", in.Port)
	b = AppendInt(b, "server_time_usec", in.Now/1e3)
	b = AppendInt(b, "uptime_in_seconds", in.UptimeSeconds)
	b = AppendInt(b, "uptime_in_days", in.UptimeSeconds/86400)
	b = AppendField(b, "executable", in.Process.Executable)
	return AppendField(b, "config_file", in.ConfigFile)
}

func appendClients(b []byte, in *Info) []byte {
	b = title(b, "Clients")
	b = AppendInt(b, "connected_clients", in.ConnectedClients)
	b = AppendInt(b, "maxclients", in.MaxClients)
	// Blocked: the clients whose request waits for its turn (WAIT).
	return AppendInt(b, "blocked_clients", in.Wait.Waiting)
}

// appendMemory: the Go heap, the keyspace's size and the maxmemory
// settings.
func appendMemory(b []byte, in *Info) []byte {
	p := in.Process
	b = title(b, "Memory")
	b = AppendInt(b, "used_memory", int64(p.HeapAlloc))
	b = AppendField(b, "used_memory_human", humanBytes(int64(p.HeapAlloc)))
	// What the runtime holds mapped: pages it returned to the OS
	// (HeapReleased) are no longer resident.
	rss := int64(p.Sys - p.HeapReleased)
	b = AppendInt(b, "used_memory_rss", rss)
	b = AppendField(b, "used_memory_rss_human", humanBytes(rss))
	b = AppendInt(b, "used_memory_dataset", in.Keyspace.Bytes)
	b = AppendInt(b, "used_memory_keys", in.UsedMemory)
	b = AppendInt(b, "maxmemory", in.MaxMemory)
	b = AppendField(b, "maxmemory_human", humanBytes(in.MaxMemory))
	b = AppendField(b, "maxmemory_policy", in.MaxMemoryPolicy)
	b = AppendInt(b, "mem_clients_normal", in.ClientMemory)
	b = AppendInt(b, "maxmemory_clients", in.ClientMemoryLimit)
	b = AppendField(b, "mem_allocator", "go")
	return AppendInt(b, "gc_cycles", int64(p.NumGC))
}

// appendPersistence: the persister's fields, or fixed Redis-compatible
// ones when nothing is persisted.
func appendPersistence(b []byte, in *Info) []byte {
	b = title(b, "Persistence")
	if in.Persistence != nil {
		return appendPairs(b, in.Persistence)
	}
	b = AppendInt(b, "loading", 0)
	b = AppendInt(b, "async_loading", 0)
	b = AppendInt(b, "rdb_changes_since_last_save", int64(in.Changes))
	b = AppendInt(b, "rdb_bgsave_in_progress", 0)
	b = AppendInt(b, "rdb_last_save_time", in.Started/1e9)
	b = AppendField(b, "rdb_last_bgsave_status", "ok")
	b = AppendInt(b, "aof_enabled", 0)
	return AppendInt(b, "aof_rewrite_in_progress", 0)
}

// appendStats: connection and command counters, and the limiter's allowed
// and limited totals, overall and per command.
func appendStats(b []byte, in *Info) []byte {
	var calls, allowed, limited int64
	for _, c := range in.Commands {
		calls += c.Calls
		allowed += c.Allowed
		limited += c.Limited
	}
	ks := in.Keyspace
	b = title(b, "Stats")
	b = AppendInt(b, "total_connections_received", in.ConnectionsReceived)
	b = AppendInt(b, "total_commands_processed", calls)
	b = AppendInt(b, "rejected_connections", in.RejectedConnections)
	b = AppendInt(b, "expired_keys", int64(ks.Expired))
	b = AppendInt(b, "leases_held", ks.Leases)
	b = AppendInt(b, "leases_expired", int64(ks.LeasesExpired))
	b = AppendInt(b, "evicted_keys", in.EvictedKeys)
	b = AppendInt(b, "evicted_clients", in.EvictedClients)
	b = AppendInt(b, "client_query_buffer_limit_disconnections", in.QueryBufferClosed)
	b = AppendInt(b, "client_query_timeout_disconnections", in.QueryTimeoutClosed)
	b = AppendInt(b, "client_output_buffer_limit_disconnections", in.OutputBufferClosed)
	b = AppendInt(b, "total_error_replies", in.ErrorReplies)
	b = AppendInt(b, "acl_access_denied_auth", in.AuthFailures)
	b = AppendInt(b, "auth_failure_disconnections", in.AuthClosed)
	b = AppendInt(b, "protected_mode_rejected_connections", in.ProtectedModeDenied)
	b = AppendInt(b, "tls_handshake_failures", in.TLSHandshakeFailures)
	b = AppendInt(b, "limiter_allowed", allowed)
	b = AppendInt(b, "limiter_limited", limited)
	b = AppendInt(b, "limit_overrides", int64(in.LimitOverrides))
	b = AppendInt(b, "limit_shadows", int64(in.LimitShadows))
	b = AppendInt(b, "limit_overridden_requests", int64(in.LimitOverridden))
	b = AppendInt(b, "shadow_requests", int64(in.ShadowRequests))
	b = AppendInt(b, "shadow_limited", int64(in.ShadowLimited))
	b = append(b, in.WaitLines...)
	b = AppendInt(b, "violations_logged", int64(in.ViolationsLogged))
	b = AppendInt(b, "violations_suppressed", int64(in.ViolationsSuppressed))
	for _, c := range in.Commands {
		if c.Decides {
			b = AppendInt(b, "allowed_"+c.Name, c.Allowed)
			b = AppendInt(b, "limited_"+c.Name, c.Limited)
		}
	}
	return b
}

// appendReplication: the cluster's fields, or those of a lone master.
func appendReplication(b []byte, in *Info) []byte {
	b = title(b, "Replication")
	if in.Replication != nil {
		return appendPairs(b, in.Replication)
	}
	b = AppendField(b, "role", "master")
	b = AppendInt(b, "connected_slaves", 0)
	return AppendInt(b, "master_repl_offset", 0)
}

func appendCPU(b []byte, in *Info) []byte {
	b = title(b, "CPU")
	b = AppendInt(b, "go_max_procs", int64(in.Process.MaxProcs))
	return AppendInt(b, "goroutines", int64(in.Process.Goroutines))
}

// appendCluster: cluster_enabled is 1 in a replication group, which
// speaks the Redis Cluster protocol (CLUSTER).
func appendCluster(b []byte, in *Info) []byte {
	b = title(b, "Cluster")
	enabled := int64(0)
	if in.Cluster {
		enabled = 1
	}
	return AppendInt(b, "cluster_enabled", enabled)
}

// appendKeyspace: db0's key count and the count of keys of each limiter
// kind present.
func appendKeyspace(b []byte, in *Info) []byte {
	ks := in.Keyspace
	b = title(b, "Keyspace")
	if ks.Keys > 0 {
		b = append(b, "db0:keys="...)
		b = strconv.AppendInt(b, ks.Keys, 10)
		b = append(b, ",expires="...)
		b = strconv.AppendInt(b, ks.Keys, 10)
		b = append(b, ",avg_ttl="...)
		b = strconv.AppendInt(b, ks.AvgTTL, 10)
		b = append(b, "\r\n"...)
	}
	for k := engine.KindNone + 1; k.Valid(); k++ {
		if n := ks.KeysByKind[k]; n > 0 {
			b = AppendInt(b, "keys_"+strings.ReplaceAll(k.String(), "-", "_"), n)
		}
	}
	return b
}

// appendCommandstats: one cmdstat_ line per command called, rejected or
// failed at least once: calls, time, rejections and failures, and for a
// limiter command its allowed and limited counts.
func appendCommandstats(b []byte, in *Info) []byte {
	b = title(b, "Commandstats")
	for _, c := range in.Commands {
		if c.Calls == 0 && c.Rejected == 0 && c.Failed == 0 {
			continue
		}
		usec := c.Time.Nanoseconds() / 1e3
		per := 0.0
		if c.Calls > 0 {
			per = float64(c.Time.Nanoseconds()) / 1e3 / float64(c.Calls)
		}
		b = append(b, "cmdstat_"+c.Name+":calls="...)
		b = strconv.AppendInt(b, c.Calls, 10)
		b = append(b, ",usec="...)
		b = strconv.AppendInt(b, usec, 10)
		b = append(b, ",usec_per_call="...)
		b = strconv.AppendFloat(b, per, 'f', 2, 64)
		b = append(b, ",rejected_calls="...)
		b = strconv.AppendInt(b, c.Rejected, 10)
		b = append(b, ",failed_calls="...)
		b = strconv.AppendInt(b, c.Failed, 10)
		if c.Limiter {
			b = append(b, ",allowed="...)
			b = strconv.AppendInt(b, c.Allowed, 10)
			b = append(b, ",limited="...)
			b = strconv.AppendInt(b, c.Limited, 10)
		}
		b = append(b, "\r\n"...)
	}
	return b
}

// latencyQuantiles are the percentiles Latencystats reports, as Redis's.
var latencyQuantiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}}

// appendLatencystats: p50, p99 and p99.9 in microseconds for every
// command with recorded latencies.
func appendLatencystats(b []byte, in *Info) []byte {
	b = title(b, "Latencystats")
	for _, c := range in.Commands {
		if c.Latency.Count == 0 {
			continue
		}
		b = append(b, "latency_percentiles_usec_"+c.Name...)
		sep := byte(':')
		for _, q := range latencyQuantiles {
			b = append(b, sep)
			sep = ','
			b = append(b, q.name+"="...)
			b = strconv.AppendFloat(b, float64(c.Latency.Quantile(q.q))/1e3, 'f', 3, 64)
		}
		b = append(b, "\r\n"...)
	}
	return b
}

func appendHotkeys(b []byte, in *Info) []byte {
	h := in.Hotkeys
	b = title(b, "Hotkeys")
	b = AppendInt(b, "hotkeys_capacity", int64(h.Capacity))
	if h.Capacity == 0 {
		return b
	}
	b = AppendInt(b, "hotkeys_memory_bytes", int64(h.MemoryBytes))
	b = AppendInt(b, "hotkeys_sample", int64(h.Sample))
	b = AppendInt(b, "hotkeys_requested_sampled", int64(h.RequestedSampled))
	b = AppendInt(b, "hotkeys_limited_sampled", int64(h.LimitedSampled))
	for _, part := range []struct {
		name string
		keys []HotKey
	}{{"requested", in.HotRequested}, {"limited", in.HotLimited}} {
		for i, k := range part.keys {
			b = AppendField(b, part.name+"_"+strconv.Itoa(i), "key="+strconv.Quote(k.Key)+",cmd="+k.Command+
				",count="+strconv.FormatUint(k.Count, 10)+",error="+strconv.FormatUint(k.Err, 10))
		}
	}
	return b
}

func appendClasses(b []byte, in *Info) []byte {
	b = title(b, "Classes")
	b = AppendInt(b, "metrics_class_rules", int64(in.ClassRules))
	b = AppendInt(b, "metrics_class_limit", int64(in.ClassLimit))
	b = AppendInt(b, "metrics_class_prefixes", int64(in.ClassPrefixes))
	for _, k := range in.Classes {
		b = AppendField(b, "class_"+k.Name, "kind="+k.Kind.String()+
			",allowed="+strconv.FormatInt(k.Allowed, 10)+",limited="+strconv.FormatInt(k.Limited, 10))
	}
	return b
}

// appendRegions: the region layer's status (an empty region without one).
func appendRegions(b []byte, in *Info) []byte {
	b = title(b, "Regions")
	if in.Regions == nil {
		return AppendField(b, "region", "")
	}
	return appendPairs(b, in.Regions)
}

func humanBytes(n int64) string {
	units := []string{"B", "K", "M", "G", "T"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + units[i]
}

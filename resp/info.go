package resp

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

// infoSection is one INFO section: its name, whether INFO with no argument
// (or "default") prints it, and the function that appends it to b.
type infoSection struct {
	name      string
	isDefault bool
	appendTo  func(s *Server, b []byte, now int64) []byte
}

// infoSections lists the INFO sections in the order Redis prints them. The
// default set leaves out commandstats, as Redis does, and latencystats, as
// Redis 7 does.
var infoSections = []infoSection{
	{"server", true, infoServer},
	{"clients", true, infoClients},
	{"memory", true, infoMemory},
	{"persistence", true, infoPersistence},
	{"stats", true, infoStats},
	{"replication", true, infoReplication},
	{"cpu", true, infoCPU},
	{"cluster", true, infoCluster},
	{"keyspace", true, infoKeyspace},
	{"commandstats", false, infoCommandstats},
	{"latencystats", false, infoLatencystats},
	{"hotkeys", false, infoHotkeys},
	{"classes", false, infoClasses},
	{"regions", false, (*Server).infoRegions},
}

// InfoSection is an INFO section of a part wired beside the server
// (Config.InfoSections): printed by INFO all, everything, or its name.
type InfoSection struct {
	// Name is the section's name, lower case ("rls"); its title is Name
	// with a capital.
	Name string
	// Fields returns the section's lines; a Value must hold no line end.
	// Called on the INFO command's connection, concurrently with serving.
	Fields func() []InfoField
}

// InfoField is one "name:value" line of INFO.
type InfoField struct {
	Name, Value string
}

func infoHandler(c *Conn, args [][]byte) error {
	want := map[string]bool{}
	if len(args) == 1 {
		want["default"] = true
	}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := want["all"] || want["everything"]
	def := want["default"]
	var b []byte
	for _, sec := range infoSections {
		if !(all || want[sec.name] || def && sec.isDefault) {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\r\n"...)
		}
		b = sec.appendTo(c.srv, b, c.srv.now())
	}
	for _, sec := range c.srv.cfg.InfoSections {
		if !(all || want[sec.Name]) {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\r\n"...)
		}
		b = append(b, "# "...)
		b = append(b, strings.ToUpper(sec.Name[:1])...)
		b = append(b, sec.Name[1:]...)
		b = append(b, "\r\n"...)
		for _, f := range sec.Fields() {
			b = field(b, f.Name, f.Value)
		}
	}
	c.WriteBulk(b)
	return nil
}

func field(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = append(b, value...)
	return append(b, "\r\n"...)
}

func fieldInt(b []byte, name string, v int64) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendInt(b, v, 10)
	return append(b, "\r\n"...)
}

// infoServer appends the Server section: versions, process and uptime.
func infoServer(s *Server, b []byte, now int64) []byte {
	b = append(b, "# Server\r\n"...)
	b = field(b, "redis_version", redisVersion)
	b = field(b, "cellserver_version", Version)
	mode := "standalone"
	if s.cfg.Cluster != nil {
		mode = "cluster" // CLUSTER answers: clients may use cluster mode
	}
	b = field(b, "redis_mode", mode)
	b = field(b, "os", runtime.GOOS+" "+runtime.GOARCH)
	b = fieldInt(b, "arch_bits", strconv.IntSize)
	b = field(b, "go_version", runtime.Version())
	b = fieldInt(b, "process_id", int64(os.Getpid()))
	port := "0"
	if st := s.settings.Lookup("port"); st != nil {
		port = st.Get()
	}
	b = field(b, "tcp_port", port)
	b = fieldInt(b, "server_time_usec", now/1e3)
	b = fieldInt(b, "uptime_in_seconds", s.uptime())
	b = fieldInt(b, "uptime_in_days", s.uptime()/86400)
	exe, _ := os.Executable()
	b = field(b, "executable", exe)
	return field(b, "config_file", s.cfg.ConfigFile)
}

// infoClients appends the Clients section.
func infoClients(s *Server, b []byte, _ int64) []byte {
	b = append(b, "# Clients\r\n"...)
	b = fieldInt(b, "connected_clients", s.clients.Load())
	b = fieldInt(b, "maxclients", s.maxClients.Load())
	// Blocked: the clients whose request waits for its turn (WAIT).
	return fieldInt(b, "blocked_clients", s.waits.count.Load())
}

// infoMemory appends the Memory section: the Go heap, the keyspace's size
// and the maxmemory settings.
func infoMemory(s *Server, b []byte, now int64) []byte {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st := s.backend.Store().Stats(now)
	b = append(b, "# Memory\r\n"...)
	b = fieldInt(b, "used_memory", int64(m.HeapAlloc))
	b = field(b, "used_memory_human", humanBytes(int64(m.HeapAlloc)))
	// What the runtime holds mapped: pages it returned to the OS
	// (HeapReleased) are no longer resident.
	rss := int64(m.Sys - m.HeapReleased)
	b = fieldInt(b, "used_memory_rss", rss)
	b = field(b, "used_memory_rss_human", humanBytes(rss))
	b = fieldInt(b, "used_memory_dataset", st.Bytes)
	b = fieldInt(b, "used_memory_keys", s.backend.Store().UsedBytes())
	b = fieldInt(b, "maxmemory", s.maxMemory.Load())
	b = field(b, "maxmemory_human", humanBytes(s.maxMemory.Load()))
	b = field(b, "maxmemory_policy", MemoryPolicy(s.policy.Load()).String())
	used, limit := s.ClientMemory()
	b = fieldInt(b, "mem_clients_normal", used)
	b = fieldInt(b, "maxmemory_clients", limit)
	b = field(b, "mem_allocator", "go")
	return fieldInt(b, "gc_cycles", int64(m.NumGC))
}

// infoPersistence appends the Persistence section: the Persister's fields,
// or fixed Redis-compatible ones when nothing is persisted.
func infoPersistence(s *Server, b []byte, _ int64) []byte {
	b = append(b, "# Persistence\r\n"...)
	if p := s.cfg.Persistence; p != nil {
		for _, f := range p.InfoFields() {
			b = field(b, f[0], f[1])
		}
		return b
	}
	b = fieldInt(b, "loading", 0)
	b = fieldInt(b, "async_loading", 0)
	b = fieldInt(b, "rdb_changes_since_last_save", int64(s.backend.Store().Changes()))
	b = fieldInt(b, "rdb_bgsave_in_progress", 0)
	b = fieldInt(b, "rdb_last_save_time", s.started/1e9)
	b = field(b, "rdb_last_bgsave_status", "ok")
	b = fieldInt(b, "aof_enabled", 0)
	return fieldInt(b, "aof_rewrite_in_progress", 0)
}

// infoStats appends the Stats section: connection and command counters,
// and the limiter's allowed and limited totals, overall and per command.
func infoStats(s *Server, b []byte, now int64) []byte {
	cs := s.commandStats()
	var calls, allowed, limited int64
	for i := range cs {
		calls += cs[i].calls
		allowed += cs[i].allowed
		limited += cs[i].limited
	}
	st := s.backend.Store().Stats(now)
	b = append(b, "# Stats\r\n"...)
	b = fieldInt(b, "total_connections_received", s.stats.connections.Load())
	b = fieldInt(b, "total_commands_processed", calls)
	b = fieldInt(b, "rejected_connections", s.stats.rejectedConns.Load())
	b = fieldInt(b, "expired_keys", int64(st.Expired))
	b = fieldInt(b, "leases_held", st.Leases)
	b = fieldInt(b, "leases_expired", int64(st.LeasesExpired))
	b = fieldInt(b, "evicted_keys", s.stats.evicted.Load())
	b = fieldInt(b, "evicted_clients", s.cmem.Evicted())
	b = fieldInt(b, "client_query_buffer_limit_disconnections", s.stats.queryLimited.Load())
	b = fieldInt(b, "client_query_timeout_disconnections", s.stats.queryTimeouts.Load())
	b = fieldInt(b, "client_output_buffer_limit_disconnections", s.stats.outputLimited.Load())
	b = fieldInt(b, "total_error_replies", s.stats.errors.Load())
	b = fieldInt(b, "acl_access_denied_auth", s.guard.Failures())
	b = fieldInt(b, "auth_failure_disconnections", s.guard.Disconnects())
	b = fieldInt(b, "protected_mode_rejected_connections", s.stats.protectedDenied.Load())
	b = fieldInt(b, "tls_handshake_failures", s.tlsFailures())
	b = fieldInt(b, "limiter_allowed", allowed)
	b = fieldInt(b, "limiter_limited", limited)
	ps := s.cfg.Policy.Stats()
	b = fieldInt(b, "limit_overrides", int64(ps.Overrides))
	b = fieldInt(b, "limit_shadows", int64(ps.Shadows))
	b = fieldInt(b, "limit_overridden_requests", int64(ps.Overridden))
	b = fieldInt(b, "shadow_requests", int64(ps.ShadowRequests))
	b = fieldInt(b, "shadow_limited", int64(s.backend.Store().Shadowed()))
	b = s.waits.infoWait(b)
	vs := s.cfg.Violations.Stats()
	b = fieldInt(b, "violations_logged", int64(vs.Logged))
	b = fieldInt(b, "violations_suppressed", int64(vs.Suppressed))
	for _, cmd := range s.table.all {
		if cmd.Group != "ratelimit" || cmd.Finish == nil {
			continue // CL.INSPECT decides nothing
		}
		b = fieldInt(b, "allowed_"+cmd.fullName, cs[cmd.index].allowed)
		b = fieldInt(b, "limited_"+cmd.fullName, cs[cmd.index].limited)
	}
	return b
}

// infoReplication appends the Replication section: the cluster's fields,
// or those of a lone master.
func infoReplication(s *Server, b []byte, _ int64) []byte {
	b = append(b, "# Replication\r\n"...)
	if cl := s.cfg.Cluster; cl != nil {
		for _, f := range cl.InfoFields() {
			b = field(b, f[0], f[1])
		}
		return b
	}
	b = field(b, "role", "master")
	b = fieldInt(b, "connected_slaves", 0)
	return fieldInt(b, "master_repl_offset", 0)
}

// infoCPU appends the CPU section: GOMAXPROCS and the goroutine count.
func infoCPU(_ *Server, b []byte, _ int64) []byte {
	b = append(b, "# CPU\r\n"...)
	b = fieldInt(b, "go_max_procs", int64(runtime.GOMAXPROCS(0)))
	return fieldInt(b, "goroutines", int64(runtime.NumGoroutine()))
}

// infoCluster appends the Cluster section: cluster_enabled is 1 in a
// replication group, which speaks the Redis Cluster protocol (CLUSTER).
func infoCluster(s *Server, b []byte, _ int64) []byte {
	b = append(b, "# Cluster\r\n"...)
	enabled := int64(0)
	if s.cfg.Cluster != nil {
		enabled = 1
	}
	return fieldInt(b, "cluster_enabled", enabled)
}

// infoKeyspace appends the Keyspace section: db0's key count and the count
// of keys of each limiter kind present.
func infoKeyspace(s *Server, b []byte, now int64) []byte {
	b = append(b, "# Keyspace\r\n"...)
	st := s.backend.Store().Stats(now)
	if st.Keys > 0 {
		b = append(b, "db0:keys="...)
		b = strconv.AppendInt(b, st.Keys, 10)
		b = append(b, ",expires="...)
		b = strconv.AppendInt(b, st.Keys, 10)
		b = append(b, ",avg_ttl="...)
		b = strconv.AppendInt(b, st.AvgTTL, 10)
		b = append(b, "\r\n"...)
	}
	for k := engine.KindNone + 1; k.Valid(); k++ {
		if n := st.KeysByKind[k]; n > 0 {
			b = fieldInt(b, "keys_"+strings.ReplaceAll(k.String(), "-", "_"), n)
		}
	}
	return b
}

// infoCommandstats appends the Commandstats section: one cmdstat_ line per
// command that was called, rejected or failed at least once.
func infoCommandstats(s *Server, b []byte, _ int64) []byte {
	cs := s.commandStats()
	b = append(b, "# Commandstats\r\n"...)
	for _, cmd := range s.table.all {
		if st := cs[cmd.index]; st.calls != 0 || st.rejected != 0 || st.failed != 0 {
			b = appendCmdstat(b, cmd, st)
		}
	}
	return b
}

// appendCmdstat appends cmd's cmdstat_ line: calls, time, rejections and
// failures, and for a limiter command its allowed and limited counts.
func appendCmdstat(b []byte, cmd *Command, st statsSnapshot) []byte {
	b = append(b, "cmdstat_"...)
	b = append(b, cmd.fullName...)
	b = append(b, ":calls="...)
	b = strconv.AppendInt(b, st.calls, 10)
	b = append(b, ",usec="...)
	b = strconv.AppendInt(b, st.nanos/1e3, 10)
	b = append(b, ",usec_per_call="...)
	per := 0.0
	if st.calls > 0 {
		per = float64(st.nanos) / 1e3 / float64(st.calls)
	}
	b = strconv.AppendFloat(b, per, 'f', 2, 64)
	b = append(b, ",rejected_calls="...)
	b = strconv.AppendInt(b, st.rejected, 10)
	b = append(b, ",failed_calls="...)
	b = strconv.AppendInt(b, st.failed, 10)
	if cmd.Group == "ratelimit" {
		b = append(b, ",allowed="...)
		b = strconv.AppendInt(b, st.allowed, 10)
		b = append(b, ",limited="...)
		b = strconv.AppendInt(b, st.limited, 10)
	}
	return append(b, "\r\n"...)
}

// latencyQuantiles are the percentiles Latencystats reports, as Redis does.
var latencyQuantiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}}

// infoLatencystats appends the Latencystats section: p50, p99 and p99.9 in
// microseconds for every command with recorded latencies.
func infoLatencystats(s *Server, b []byte, _ int64) []byte {
	b = append(b, "# Latencystats\r\n"...)
	lat := s.latencyHists()
	if lat == nil {
		return b
	}
	for _, cmd := range s.table.all {
		h := lat.Snapshot(cmd.index)
		if h.Count == 0 {
			continue
		}
		b = append(b, "latency_percentiles_usec_"...)
		b = append(b, cmd.fullName...)
		for i, q := range latencyQuantiles {
			if i == 0 {
				b = append(b, ':')
			} else {
				b = append(b, ',')
			}
			b = append(b, q.name...)
			b = append(b, '=')
			b = strconv.AppendFloat(b, float64(h.Quantile(q.q))/1e3, 'f', 3, 64)
		}
		b = append(b, "\r\n"...)
	}
	return b
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

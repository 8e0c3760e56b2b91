package resp

import (
	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/serverstats"
)

// INFO: serverstats owns the sections, their order and the wording of
// their fields; the server gathers what the selected sections report
// (info) and writes the bulk reply.

func infoHandler(c *Conn, args [][]byte) error {
	sel := serverstats.Select(args[1:])
	in := gatherInfo(c.srv, c.srv.now(), sel)
	c.WriteBulk(serverstats.Append(nil, &in, sel))
	return nil
}

// gatherInfo gathers s's state for the sections sel selects (the others'
// parts may stay zero).
func gatherInfo(s *Server, now int64, sel serverstats.Selection) serverstats.Info {
	in := serverstats.Info{
		Stats: statsOf(s, sel.Wants("stats") || sel.Wants("commandstats") || sel.Wants("latencystats"), true),
		Now:   now, Started: s.started, UptimeSeconds: s.uptime(), Process: serverstats.ReadProcess(),
		RedisVersion: redisVersion, Version: Version, Cluster: s.cfg.Cluster != nil,
		Port: "0", ConfigFile: s.cfg.ConfigFile, MaxClients: s.maxClients.Load(),
		MaxMemoryPolicy: s.mem.Policy().String(),
		Extra:           s.cfg.InfoSections,
	}
	if st := s.settings.Lookup("port"); st != nil {
		in.Port = st.Get()
	}
	if sel.Wants("memory") || sel.Wants("stats") || sel.Wants("keyspace") {
		ks := s.backend.Store().Stats(now)
		in.Keyspace = serverstats.Keyspace{Keys: ks.Keys, KeysByKind: ks.KeysByKind, Expired: ks.Expired,
			Leases: ks.Leases, LeasesExpired: ks.LeasesExpired, Bytes: ks.Bytes, AvgTTL: ks.AvgTTL}
	}
	if p := s.cfg.Persistence; p != nil && sel.Wants("persistence") {
		in.Persistence = p.InfoFields()
	} else if sel.Wants("persistence") {
		in.Changes = s.backend.Store().Changes()
	}
	if cl := s.cfg.Cluster; cl != nil && sel.Wants("replication") {
		in.Replication = cl.InfoFields()
	}
	if r := s.cfg.Regions; r != nil && sel.Wants("regions") {
		st := r.Status()
		in.Regions = st.Fields()
	}
	ps := s.cfg.Policy.Stats()
	in.LimitOverrides, in.LimitShadows = ps.Overrides, ps.Shadows
	if sel.Wants("stats") {
		in.WaitLines = s.waits.done.AppendInfo(nil)
	}
	if h := s.hot.Load(); h != nil {
		in.Hotkeys = serverstats.Hotkeys{Capacity: h.Capacity(), MemoryBytes: h.MemoryBytes(), Sample: hotkeys.Sample,
			RequestedSampled: h.Requested.Total(), LimitedSampled: h.Limited.Total()}
	}
	cfg := s.classes.Config()
	in.ClassRules, in.ClassLimit = len(cfg.Rules), cfg.Limit
	if cl := s.classes.Current(); cl != nil {
		in.ClassPrefixes = cl.Learned()
	}
	return in
}

// fieldInt appends the INFO line "name:v".
func fieldInt(b []byte, name string, v int64) []byte { return serverstats.AppendInt(b, name, v) }

// field appends the INFO line "name:value".
func field(b []byte, name, value string) []byte { return serverstats.AppendField(b, name, value) }

// WaitStats is the waiting requests' part of Server.Stats (serverstats).
type WaitStats = serverstats.WaitStats

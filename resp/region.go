package resp

import (
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/shards"
)

// RegisterRegions adds the commands of the region layer to s, backed by g:
// REGION.EXEC (what peer regions send) and REGION STATUS. INFO regions is
// served from Config.Regions. Call it once, before s serves.
func RegisterRegions(s *Server, g *region.Gate) {
	for _, cmd := range regionCommands(g) {
		s.Handle(cmd)
	}
}

func regionCommands(g *region.Gate) []*Command {
	return []*Command{
		{
			Name: "region.exec", Arity: -11, Flags: FlagWrite | FlagDenyOOM,
			FirstKey: 4, LastKey: -1, KeyStep: 7, MovableKeys: region.ExecKeys, Group: "region", Since: "0.1.0",
			Summary:    "Decides limiter requests forwarded by a peer region for keys whose home is this region, under this region's limit-override and limit-shadow (sent by cellserver itself).",
			Complexity: "O(N) where N is the number of keys",
			Args: []Arg{
				{Name: "origin", Type: "string", Doc: "the sending region; must be one of this server's region-peer names"},
				{Name: "target", Type: "string", Doc: "the region the sender means to reach; must be this server's region"},
				{Name: "how", Type: "oneof", Args: []Arg{{Name: "one", Type: "pure-token", Token: "ONE", Doc: "one limiter request"}, {Name: "all", Type: "pure-token", Token: "ALL", Doc: "a CL.THROTTLEALL: all consumed if all allow"}}},
				{Name: "request", Type: "block", Multiple: true, Args: []Arg{
					{Name: "key", Type: "key", Doc: "the limited key"},
					{Name: "kind", Type: "string", Doc: "gcra, token-bucket, leaky-bucket, fixed-window, sliding-window, sliding-log or concurrency"},
					{Name: "burst", Type: "integer", Doc: "max_burst, capacity or limit"},
					{Name: "rate", Type: "integer", Doc: "count_per_period, refill_tokens or leak_count (0 for the windows)"},
					{Name: "period", Type: "integer", Doc: "period or window in nanoseconds"},
					{Name: "quantity", Type: "integer", Doc: "units taken (negative: a GCRA refund)"},
					{Name: "flags", Type: "integer", Doc: "the request's flags: 1 a token bucket's INTERVAL variant, 2 shadow (limit-shadow where the request entered), 4 exact, 8 a concurrency request (CC.*, ONE only: its op, 1 acquire, 2 release or 3 renew, and its lease id follow as two more arguments); their sum, 0 for none"},
				}},
			},
			Reply: "Array holding, per key, an array of six integers: `limited`, `limit`, `remaining`, `retry_after`, `reset_after`, `wait`, the durations in nanoseconds (unrounded; the forwarding region rounds them as its command does); a CC.ACQUIRE's adds its lease id, a bulk string, seventh.",
			Errors: []string{"`ERR region: wrong region name: …` when target is not this region; `ERR region: unknown origin region: …` when origin is not a region-peer; `ERR region: malformed peer operation: …` for arguments that do not form valid requests. Each is logged and nothing is applied.",
				"`ERR region: no region is configured` on a server without `region`.",
				"The errors of the limiter commands (WRONGTYPE, OOM) and, in a cluster, MOVED and the other redirections."},
			Handler: func(c *Conn, args [][]byte) error {
				if g == nil {
					return region.ErrNotConfigured
				}
				call, err := region.DecodeExec(args[1:], c.srv.cfg.Parse.MaxLogLimit)
				if err != nil {
					g.RefusedBatch(err)
					return err
				}
				// The home's limit-override and limit-shadow decide a global
				// key, whichever region the request entered by (docs/regions.md).
				if err := c.applyPolicy(&call.Op); err != nil {
					return err
				}
				c.markNoGrow(&call.Op) // maxmemory holds for a peer's decisions as for a client's
				var res shards.Result
				if err := g.Exec(c.srv.ctx, &call, &res); err != nil {
					return err
				}
				if res.Err != nil {
					return res.Err
				}
				c.WriteArray(len(res.Results))
				var f []int64
				for i := range res.Results {
					f = region.EncodeResult(f[:0], &res.Results[i])
					lease := res.Results[i].Lease
					if lease != "" {
						c.WriteArray(len(f) + 1) // CC.ACQUIRE's lease id, seventh
					} else {
						c.WriteArray(len(f))
					}
					for _, v := range f {
						c.WriteInt(v)
					}
					if lease != "" {
						c.WriteBulkString(lease)
					}
				}
				return nil
			},
		},
		{
			Name: "region.apply", Arity: -13, Flags: FlagWrite | FlagDenyOOM,
			FirstKey: 6, LastKey: -1, KeyStep: 7, Group: "region", Since: "0.1.0",
			Summary:    "Applies a batch of async consumption shipped by a peer region, exactly once (sent by cellserver itself).",
			Complexity: "O(N) where N is the number of keys",
			Args: []Arg{
				{Name: "origin", Type: "string", Doc: "the sending region; must be one of this server's region-peer names"},
				{Name: "target", Type: "string", Doc: "the region the sender means to reach; must be this server's region"},
				{Name: "stream", Type: "string", Doc: "the sending process's stream id for one day: 1 to 32 hex digits (cellserver sends 32 random ones), `-`, and the day it started (days since the Unix epoch, UTC)"},
				{Name: "slot", Type: "integer", Doc: "the hash slot every key of the batch hashes to, 0 to 16383"},
				{Name: "seq", Type: "integer", Doc: "the batch's number in the stream's lane for that slot, from 1; applied only when it is the next one"},
				{Name: "consumption", Type: "block", Multiple: true, Args: []Arg{
					{Name: "key", Type: "key", Doc: "the limited key"},
					{Name: "kind", Type: "string", Doc: "as REGION.EXEC"},
					{Name: "burst", Type: "integer", Doc: "as REGION.EXEC"},
					{Name: "rate", Type: "integer", Doc: "as REGION.EXEC"},
					{Name: "period", Type: "integer", Doc: "as REGION.EXEC (ns)"},
					{Name: "quantity", Type: "integer", Doc: "units consumed (negative: a GCRA refund); never 0"},
					{Name: "flags", Type: "integer", Doc: "as REGION.EXEC: 1 for INTERVAL or 0 (a consumption carries no shadow or exact flag)"},
				}},
			},
			Reply: "Simple string `OK` when the batch was applied (every consumption forced, whatever the key's limit, and the lane's sequence recorded in the key `region:seq:<origin>:<digest>:{<tag>}` in the same write, the digest the first 32 hex digits of the stream's SHA-256, a key that expires 2 to 12 days after the stream's day); `DUP` when that batch had been applied before (nothing changes).",
			Errors: []string{"`ERR region: wrong region name: …`, `ERR region: unknown origin region: …`, `ERR region: malformed peer operation: …` as REGION.EXEC (logged, nothing applied); the last also when a key does not hash to slot, or when a consumption exceeds what its key can hold.",
				"`OUTOFSEQ <expected> batch <seq> is out of sequence: its lane expects batch <expected> …` when batches of the lane are missing before seq (nothing applied; counted as `out_of_sequence` in `INFO regions`, logged at most once a minute per peer); cellserver sends its batch again as `<expected>`.",
				"`ERR region: no region is configured` on a server without `region`.",
				"WRONGTYPE when a key holds another kind of limiter (nothing applied); in a cluster, MOVED and the other redirections.",
				"`OOM command not allowed when used memory > 'maxmemory'.` under `maxmemory-policy noeviction` while the keyspace is over `maxmemory`, when the batch would create a key (nothing applied; the sender keeps it and sends it again)."},
			Handler: func(c *Conn, args [][]byte) error {
				if g == nil {
					return region.ErrNotConfigured
				}
				call, err := region.DecodeApply(args[1:], c.srv.cfg.Parse.MaxLogLimit)
				if err != nil {
					g.RefusedBatch(err)
					return err
				}
				call.NoGrow = c.srv.oom.Load() // as markNoGrow: over maxmemory, no new keys
				dup, err := g.Apply(c.srv.ctx, &call)
				if err != nil {
					return err
				}
				if dup {
					c.WriteSimple("DUP")
				} else {
					c.WriteOK()
				}
				return nil
			},
		},
		{
			Name: "region", Arity: -2, Flags: FlagStale, Group: "region", Since: "0.1.0",
			Summary: "Inspects the region layer.", Complexity: "Depends on the subcommand",
			Subcommands: []*Command{{
				Name: "status", Arity: 2, Flags: FlagStale | FlagFast, Group: "region", Since: "0.1.0",
				Summary: "Returns this region's name, policy size and the state of each peer region.", Complexity: "O(peers)",
				Reply:  "Map of bulk strings (a flat array of name, value pairs in RESP2): the fields of `INFO regions` (`region`, `region_policies`, `region_unreachable`, `region_split_share`, `region_forwarded`, `region_fallbacks`, `region_refused`, `region_peers`, and one `region_peer_<name>` per peer: `state=up|down|unknown,last_contact_ms=…,forwarded=…,failed=…,served=…` for global keys, then for async keys what waits for it and was shipped to it, `queued=…,dropped=…,batches_sent=…,ops_sent=…,retries=…,resequenced=…,lag_ms=…` (`resequenced`: batches it refused as out of sequence, having lost batches it had acknowledged, sent again as the one it expected), and what came from it, `batches_applied=…,ops_applied=…,duplicates=…,out_of_sequence=…,last_applied_ms=…,policy_mismatches=…` (`out_of_sequence`: its batches refused because batches of their lane were missing before them), the last counting its calls for keys this region's `region-policy` puts under another mode or home).",
				Errors: []string{"`ERR region: no region is configured` on a server without `region`."},
				Handler: func(c *Conn, _ [][]byte) error {
					if g == nil {
						return region.ErrNotConfigured
					}
					st := g.Status()
					f := st.Fields()
					c.WriteMap(len(f))
					for _, kv := range f {
						c.WriteBulkString(kv[0])
						c.WriteBulkString(kv[1])
					}
					return nil
				},
			}},
		},
	}
}

// infoRegions is INFO's regions section (empty without a region).
func (s *Server) infoRegions(b []byte, _ int64) []byte {
	b = append(b, "# Regions\r\n"...)
	if s.cfg.Regions == nil {
		return field(b, "region", "")
	}
	st := s.cfg.Regions.Status()
	for _, f := range st.Fields() {
		b = field(b, f[0], f[1])
	}
	return b
}

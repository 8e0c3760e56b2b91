package resp

import (
	"github.com/cellserver/cellserver/shards"
)

// maxmemory: the limit, the policy and the timer are internal/maxmemory's
// Monitor (s.mem); the server deletes through the backend and refuses
// growing writes while the keyspace is over (markNoGrow).

// memoryLoop enforces maxmemory until the server's context ends, deleting
// through the backend.
func (s *Server) memoryLoop() {
	defer s.bg.Done()
	var ops [1]shards.Op
	var res [1]shards.Result
	del := func(keys [][]byte) (int64, error) {
		ops[0] = shards.Op{Code: shards.OpDel, Keys: keys}
		if err := s.backend.Write(s.ctx, ops[:], res[:]); err != nil {
			return 0, err
		}
		return res[0].N, nil
	}
	s.mem.Run(s.ctx, s.cfg.MemoryCheckInterval, s.mayEvict, s.backend.Store(), del, func(evicted int64, err error) {
		s.stats.Evicted.Add(evicted)
		if err != nil {
			s.log.Warn("maxmemory: eviction failed", "err", err)
		}
	})
}

// mayEvict reports whether this node deletes keys for maxmemory: a
// standalone server, or a cluster's leader (followers apply its deletions).
func (s *Server) mayEvict() bool {
	return s.cfg.Cluster == nil || s.cfg.Cluster.Role().Leader
}

// markNoGrow sets op.NoGrow when the noeviction policy applies: the
// keyspace is over maxmemory and op is a limiter op. The keyspace then
// refuses the op, under the key's lock, exactly when it would create a key
// or grow one (a sliding log that must enlarge its array), answered as OOM;
// fixed-size updates, denials and peeks go on (see DESIGN.md).
func (c *Conn) markNoGrow(op *shards.Op) {
	op.NoGrow = c.srv.mem.OOM() && (op.Code == shards.OpLimit || op.Code == shards.OpLimitAll || op.Code == shards.OpRestore)
}

package resp

import (
	"time"

	"github.com/cellserver/cellserver/internal/maxmemory"
	"github.com/cellserver/cellserver/shards"
)

// maxmemory. The server checks the keyspace's memory (shards'
// Store.UsedBytes: records, key bytes and sliding logs of the live keys) on
// a timer rather than per command, so that the hot path pays one atomic
// load. Between two checks the keyspace can outgrow the limit by what new
// keys and growing logs take in one interval.

// MemoryPolicy is what happens when the keyspace is over maxmemory
// (internal/maxmemory).
type MemoryPolicy = maxmemory.Policy

// ParseMemoryPolicy reads a maxmemory-policy name (noeviction, volatile-ttl).
func ParseMemoryPolicy(s string) (MemoryPolicy, error) { return maxmemory.ParsePolicy(s) }

// memoryLoop enforces maxmemory until the server's context ends.
func (s *Server) memoryLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.cfg.MemoryCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.checkMemory()
	}
}

// checkMemory compares the keyspace with maxmemory once and applies the
// policy (maxmemory.Check), deleting through the backend.
func (s *Server) checkMemory() {
	var ops [1]shards.Op
	var res [1]shards.Result
	oom, evicted, err := maxmemory.Check(s.ctx, s.maxMemory.Load(), MemoryPolicy(s.policy.Load()), s.mayEvict, s.backend.Store(),
		func(keys [][]byte) (int64, error) {
			ops[0] = shards.Op{Code: shards.OpDel, Keys: keys}
			if err := s.backend.Write(s.ctx, ops[:], res[:]); err != nil {
				return 0, err
			}
			return res[0].N, nil
		})
	s.stats.evicted.Add(evicted)
	if err != nil {
		s.log.Warn("maxmemory: eviction failed", "err", err)
	}
	s.oom.Store(oom)
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
	op.NoGrow = c.srv.oom.Load() && (op.Code == shards.OpLimit || op.Code == shards.OpLimitAll || op.Code == shards.OpRestore)
}

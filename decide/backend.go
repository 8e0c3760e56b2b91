package decide

import (
	"context"
	"sync"

	"github.com/cellserver/cellserver/shards"
)

// Backend executes keyspace operations: the interface every stage of the
// decision path has and every front door calls. Implementations: Local
// (standalone), replication.Node (a group), region.Gate (in front of
// either). Doors call a Backend from many connections at once;
// implementations must be safe for concurrent use.
type Backend interface {
	// Write applies ops in order and fills res[i] for ops[i] (len(res) ==
	// len(ops)); it returns only once they are applied (in a cluster:
	// committed). ctx bounds the wait. A non-nil error means the ops may not
	// have been applied and every reply answers that error. The ops' keys
	// are valid only during the call: an implementation that keeps them
	// must copy them.
	Write(ctx context.Context, ops []shards.Op, res []shards.Result) error
	// WriteAtomic is Write for the writes of one transaction (EXEC): no
	// op of any other Write or WriteAtomic call is applied between its
	// ops, and in a cluster they are one log entry, so that a failover
	// applies all of them or none.
	WriteAtomic(ctx context.Context, ops []shards.Op, res []shards.Result) error
	// ReadNow confirms this node may serve a read (in a cluster: leadership
	// confirmed, or local reads allowed) and returns the instant (Unix ns)
	// at which reads evaluate expiry.
	ReadNow(ctx context.Context) (int64, error)
	// Store is the keyspace reads are served from.
	Store() *shards.Store
}

// WriteFunc is a Backend's Write, or a stage's Write bound to where it
// sends (a group's WriteGroup bound to its group).
type WriteFunc func(ctx context.Context, ops []shards.Op, res []shards.Result) error

// Local is the standalone Backend: operations apply directly to a Store at
// the instant its clock returns, read once per Write call so that a pipelined
// batch shares one instant.
type Local struct {
	store *shards.Store
	now   func() int64
	// tx are held shared by Write (one, chosen by the first key) and all
	// exclusively by WriteAtomic, so that no write lands between a
	// transaction's ops while ordinary writes of different connections
	// still run in parallel. Striped, one cache line each, because a
	// single lock's reader count would be one line every event loop
	// writes on every batch.
	tx [txStripes]txStripe
}

// txStripes is the number of Local's transaction locks, a power of two.
const txStripes = 32

type txStripe struct {
	sync.RWMutex
	_ [64 - 24]byte // one cache line each (sync.RWMutex is 24 bytes)
}

// stripe returns the transaction lock a Write of ops takes: by its first
// key (FNV-1a of up to 16 bytes), so that connections on different keys
// mostly take different locks.
func (l *Local) stripe(ops []shards.Op) *txStripe {
	var h uint32 = 2166136261
	if len(ops) > 0 && len(ops[0].Keys) > 0 {
		k := ops[0].Keys[0]
		for i := 0; i < len(k) && i < 16; i++ {
			h = (h ^ uint32(k[i])) * 16777619
		}
	}
	return &l.tx[h&(txStripes-1)]
}

var _ Backend = (*Local)(nil)

// NewLocal returns a Backend over store whose time comes from now (Unix ns;
// it must be safe for concurrent use).
func NewLocal(store *shards.Store, now func() int64) *Local {
	return &Local{store: store, now: now}
}

// Write applies ops in order at one instant; it never fails.
func (l *Local) Write(_ context.Context, ops []shards.Op, res []shards.Result) error {
	s := l.stripe(ops)
	s.RLock()
	l.apply(ops, res)
	s.RUnlock()
	return nil
}

// WriteAtomic applies ops in order at one instant, excluding every other
// write meanwhile; it never fails.
func (l *Local) WriteAtomic(_ context.Context, ops []shards.Op, res []shards.Result) error {
	for i := range l.tx {
		l.tx[i].Lock()
	}
	l.apply(ops, res)
	for i := range l.tx {
		l.tx[i].Unlock()
	}
	return nil
}

func (l *Local) apply(ops []shards.Op, res []shards.Result) {
	now := l.now()
	for i := range ops {
		l.store.Exec(&ops[i], now, &res[i])
	}
}

// ReadNow returns the clock's instant; a standalone server may always read.
func (l *Local) ReadNow(context.Context) (int64, error) { return l.now(), nil }

// Store returns the keyspace.
func (l *Local) Store() *shards.Store { return l.store }

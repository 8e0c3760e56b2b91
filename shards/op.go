package shards

import "github.com/cellserver/cellserver/engine"

// OpCode names a write operation on the keyspace. Writes are what standalone
// mode applies directly and what the cluster replicates through the Raft log;
// every replica applies the same Op at the same stamped instant and so reaches
// the same state.
type OpCode uint8

// The write operations.
const (
	// OpLimit runs Reqs[0] on Keys[0] (one limiter command).
	OpLimit OpCode = iota + 1
	// OpLimitAll runs Reqs[i] on Keys[i] for every i atomically:
	// all consumed if all allow, none otherwise (CL.THROTTLEALL).
	OpLimitAll
	// OpDel deletes Keys; Result.N is how many existed.
	OpDel
	// OpFlush deletes every key.
	OpFlush
)

// Op is one write operation. Keys and Reqs are parallel slices for OpLimit
// and OpLimitAll; OpDel uses Keys only; OpFlush uses neither.
type Op struct {
	Code OpCode
	Keys [][]byte
	Reqs []engine.Request
	// NoGrow refuses the op with ErrWouldGrow, changing nothing, when it
	// would make the keyspace larger: create a key (OpLimit, OpLimitAll)
	// or grow a key's accounted size (a sliding log's array that must be
	// enlarged to take a new entry). Decisions that keep a key's size
	// (every fixed-size limiter, a log entry merged or appended into spare
	// capacity), refusals and peeks are applied as usual. The wire layer
	// sets it while the keyspace is over maxmemory under noeviction; it is
	// part of the replicated op, so every replica decides alike.
	NoGrow bool
}

// Result is the outcome of one Op.
type Result struct {
	// Err is a failure of the whole op, in which case nothing changed:
	// ErrWrongType, ErrBadOp, ErrKeyTooLarge, ErrShardFull or ErrWouldGrow.
	Err error
	// Results holds one engine.Result per key of OpLimit / OpLimitAll.
	Results []engine.Result
	// N is the count reply of OpDel.
	N int64
}

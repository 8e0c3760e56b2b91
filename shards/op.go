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
	// OpFlush deletes every key, and empties the moving set.
	OpFlush
	// OpRestore stores State under Keys[0] (RESTORE, and the target side
	// of a key move). A live key fails it with ErrBusyKey unless Replace;
	// with NoGrow, creating the key (or enlarging it) fails with
	// ErrWouldGrow. The key then expires when State says, as a key loaded
	// from a snapshot: a State already expired at now stores nothing (and,
	// with Replace, deletes the key). Result.N is 1 when the key was
	// stored. A key of the moving set is restored too (its move was sent
	// back here), and leaves the set.
	OpRestore
	// OpMoveOut takes every live key of Keys out of the keyspace into the
	// moving set (the source side of a key move), where the key is absent
	// for reads and refuses writes with ErrMoving. A key already moving
	// stays so (unless Op.Exclusive); a key neither live nor moving is
	// ignored. Result.N is the number of Keys in the moving set afterwards.
	OpMoveOut
	// OpMoveDone drops Keys from the moving set: the move completed in
	// another group. Result.N is how many were dropped.
	OpMoveDone
	// OpMoveAbort puts every key of Keys in the moving set back into the
	// keyspace (its moving state overwriting any key created meanwhile; a
	// state expired meanwhile leaves the key absent) and drops it from the
	// set. Result.N is how many were taken out of the set.
	OpMoveAbort
)

// Op is one write operation. Keys and Reqs are parallel slices for OpLimit
// and OpLimitAll; OpDel, OpRestore and the moves use Keys only; OpFlush
// uses neither.
//
// Any op but OpFlush, OpRestore and the moves that names a key of the
// moving set fails as a whole with ErrMoving.
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
	// Asking marks an op sent after ASKING (Redis Cluster). The Store
	// ignores it; the cluster's slot check reads it, to serve a key of a
	// slot being imported.
	Asking bool
	// State is what OpRestore stores; other ops ignore it. It must pass
	// snapshot.ValidateState (the decoders that produce it check), and its
	// Log is copied, never kept.
	State engine.State
	// Replace lets OpRestore overwrite a live key (RESTORE ... REPLACE).
	Replace bool
	// Dest is where OpMoveOut's keys go (a RESP address, host:port), or
	// empty. The Store ignores it; the cluster's state records it, to
	// decide whether a key left in flight may be put back.
	Dest string
	// Exclusive makes OpMoveOut refuse with ErrMoving, changing nothing,
	// when a key of Keys is already moving: the move that takes a key is
	// the only one that may later put it back (OpMoveAbort), so two moves
	// of one key started from different nodes of a group cannot both
	// believe they own it. Ops through one replicated log apply in order;
	// on a standalone store the check and the take are not one step
	// against a concurrent OpMoveOut (its MIGRATEs run one at a time).
	Exclusive bool
}

// Result is the outcome of one Op.
type Result struct {
	// Err is a failure of the whole op, in which case nothing changed:
	// ErrWrongType, ErrBadOp, ErrKeyTooLarge, ErrShardFull, ErrWouldGrow,
	// ErrBusyKey or ErrMoving.
	Err error
	// Results holds one engine.Result per key of OpLimit / OpLimitAll.
	Results []engine.Result
	// N is the count reply of OpDel, OpRestore and the moves.
	N int64
}

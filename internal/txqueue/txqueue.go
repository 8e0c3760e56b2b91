package txqueue

import "errors"

// Defaults of transaction-max-commands and transaction-max-bytes. A
// transaction's writes are one raft log entry that every member writes,
// sends and applies as one step while other clients' writes wait behind
// it; at these bounds the largest transaction commits in a few hundred
// milliseconds on a 3-node group (docs/performance.md, "The largest
// transaction"), and normal transactions (tens of commands) never meet
// them.
const (
	DefaultMaxCommands = 10000
	DefaultMaxBytes    = 1 << 20
)

// EntryOverhead is what one queued command accounts for in memory beyond
// its argument bytes and slice headers (its bookkeeping), so that a flood
// of empty commands is bounded too.
const EntryOverhead = 64

// Reply sizes for ReplyEstimate.
const (
	// DecisionReplyMax bounds the reply of one key of a batchable write:
	// a limiter decision is an array of at most six integers ("*6\r\n"
	// and six ":<int64>\r\n", 4 + 6×23 = 142 bytes); DEL's integer and
	// RESTORE's OK are shorter, and so are the usual error lines.
	DecisionReplyMax = 142
	// ReplyLineMax is counted for each other queued command beyond its
	// arguments' bytes (a status, an integer or a short error line).
	ReplyLineMax = 32
)

// ErrReadBetween refuses a write queued after a read that follows a
// write: the writes are applied as one step, so a read between two of
// them could not see the first.
var ErrReadBetween = errors.New("transaction reads the keyspace between two writes")

// LimitError refuses a command queued past one of a transaction's bounds:
// the setting that bounds it and its value (Limit, in Unit).
type LimitError struct {
	Setting string // transaction-max-commands, transaction-max-bytes or client-query-buffer-limit
	Limit   int64
	Unit    string // "commands" or "bytes"
}

func (e *LimitError) Error() string { return "transaction past " + e.Setting }

// ReplyError refuses EXEC when the transaction's reply would pass the
// client's output buffer hard limit: Estimate bytes against Hard.
type ReplyError struct{ Estimate, Hard int64 }

func (e *ReplyError) Error() string { return "transaction reply over client-output-buffer-limit" }

// Access classifies a queued command for the order rule.
type Access uint8

const (
	// None: the command neither reads nor writes the keyspace.
	None Access = iota
	// Write: a batchable write, part of the transaction's one atomic write.
	Write
	// Keyspace: a command that reads the keyspace, or writes it outside
	// the atomic write, and runs on its own in queue order.
	Keyspace
)

// Bounds are a transaction's limits as in force when a command is queued.
type Bounds struct {
	Commands int64 // transaction-max-commands
	ArgBytes int64 // transaction-max-bytes: the queue's argument bytes
	Memory   int64 // client-query-buffer-limit: what the queue accounts for
}

// Entry is one queued command. Its arguments are copies (the read buffer
// is reused by the next batch), in one allocation.
type Entry[C any] struct {
	Cmd    C
	Args   [][]byte
	Asking bool // queued right after ASKING
}

// Queue is a connection's transaction, from MULTI to EXEC or DISCARD.
type Queue[C any] struct {
	// On: inside MULTI.
	On bool
	// Failed: a command was refused while queuing (unknown, arity, not
	// allowed, redirected, too large); EXEC answers EXECABORT.
	Failed bool
	// Over: a command passed a bound (LimitError); the queue was let go
	// of and later commands are accepted without being kept, since the
	// transaction can only abort.
	Over    bool
	Entries []Entry[C]
	// Bytes is what the queue accounts for in memory, against
	// client-query-buffer-limit; ArgBytes its arguments' bytes (about
	// the size of its log entry), against transaction-max-bytes.
	Bytes, ArgBytes int64
	// wrote: a keyspace write is queued; readAfter: then a command with
	// Keyspace access.
	wrote, readAfter bool
}

// Reset ends the transaction and lets go of its queue, keeping a small
// one's backing array for the next.
func (q *Queue[C]) Reset() {
	clear(q.Entries)
	es := q.Entries[:0]
	if cap(es) > 1024 {
		es = nil
	}
	*q = Queue[C]{Entries: es}
}

// Add queues cmd with a copy of args, or refuses it (and marks the
// transaction Failed): a *LimitError past one of b (the queue is then
// let go of and the transaction is Over), or ErrReadBetween for a Write
// after a Keyspace command that follows a write. Once Over, Add keeps
// nothing and returns nil.
func (q *Queue[C]) Add(cmd C, args [][]byte, asking bool, acc Access, b Bounds) error {
	if q.Over {
		return nil
	}
	size, argBytes := Size(args)
	if err := q.bound(size, argBytes, b); err != nil {
		clear(q.Entries)
		q.Entries, q.Bytes = nil, 0
		q.Over, q.Failed = true, true
		return err
	}
	switch {
	case acc == Write && q.readAfter:
		q.Failed = true
		return ErrReadBetween
	case acc == Write:
		q.wrote = true
	case acc == Keyspace && q.wrote:
		q.readAfter = true
	}
	buf := make([]byte, 0, argBytes)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	q.Bytes += size
	q.ArgBytes += argBytes
	q.Entries = append(q.Entries, Entry[C]{Cmd: cmd, Args: cp, Asking: asking})
	return nil
}

// Size returns what one queued command with args accounts for in memory
// (its argument bytes, a slice header each and EntryOverhead) and its
// argument bytes alone.
func Size(args [][]byte) (size, argBytes int64) {
	for _, a := range args {
		argBytes += int64(len(a))
	}
	return EntryOverhead + argBytes + 24*int64(len(args)), argBytes
}

// bound reports whether one more command (size bytes in memory, argBytes
// of arguments) passes one of b, naming the setting.
func (q *Queue[C]) bound(size, argBytes int64, b Bounds) error {
	switch {
	case int64(len(q.Entries)) >= b.Commands:
		return &LimitError{Setting: "transaction-max-commands", Limit: b.Commands, Unit: "commands"}
	case q.ArgBytes+argBytes > b.ArgBytes:
		return &LimitError{Setting: "transaction-max-bytes", Limit: b.ArgBytes, Unit: "bytes"}
	case q.Bytes+size > b.Memory:
		return &LimitError{Setting: "client-query-buffer-limit", Limit: b.Memory, Unit: "bytes"}
	}
	return nil
}

// ReplyEstimate estimates, before anything runs, the bytes of EXEC's
// reply: for each batchable write DecisionReplyMax per key (writeKeys
// returns an entry's key count, or -1 when it is no batchable write),
// whatever the numbers; for any other command ReplyLineMax and its
// arguments' bytes (ECHO's reply is its argument; most are shorter).
// Commands whose reply does not follow from their arguments (KEYS, INFO,
// CLIENT LIST) are checked against the limit as their reply is built.
func (q *Queue[C]) ReplyEstimate(writeKeys func(e *Entry[C]) int) int64 {
	n := int64(16) // the array header
	for i := range q.Entries {
		e := &q.Entries[i]
		if k := writeKeys(e); k >= 0 {
			n += int64(max(k, 1)) * DecisionReplyMax
			continue
		}
		n += ReplyLineMax
		for _, a := range e.Args {
			n += int64(len(a))
		}
	}
	return n
}

// CheckReply refuses a reply of estimate bytes that, with pending bytes
// already waiting for the client, would pass hard (no limit when hard ≤ 0):
// once a transaction's writes are applied, a client closed for the size
// of their reply could not tell that they were.
func CheckReply(estimate, pending, hard int64) error {
	if hard > 0 && estimate+pending > hard {
		return &ReplyError{Estimate: estimate, Hard: hard}
	}
	return nil
}

package resp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/respclient"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// DUMP, RESTORE and MIGRATE: a key's limiter state leaves one server and
// arrives at another as a DUMP payload (snapshot.EncodeDump: versioned,
// checksummed, cellserver's own). MIGRATE moves keys atomically per key:
// the source first takes them out of its keyspace into the moving set
// (shards.OpMoveOut), where every command on them answers TRYAGAIN, then
// restores them on the target, then drops them (OpMoveDone) or, for the
// keys the target did not take, puts them back (OpMoveAbort). So a key's
// state exists in exactly one place at any instant, and a key exhausted
// before the move is exhausted after it.

// Errors of MIGRATE, in Redis's wording.
var (
	errMigrateConnect = cluster.ErrTargetUnreachable // worded in errors.go
	errMigrateWrite   = &textError{"IOERR error or timeout writing to target instance"}
	errMigrateRead    = &textError{"IOERR error or timeout reading to target instance"}
	errMigrateKeysArg = &textError{"ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"}
)

// newMover returns the server's Mover: over the group's log in a cluster
// (its Cluster is a cluster.MoveLog, as ClusterOf's is), over a lease in
// memory on a standalone server (one process is the whole group). Its
// holder id is random per server, so that two nodes of a group never
// share one.
func newMover(cl Cluster) *cluster.Mover {
	var id [8]byte
	rand.Read(id[:])
	var log cluster.MoveLog = cluster.NewLocalMoves(nil)
	if ml, ok := cl.(cluster.MoveLog); ok {
		log = ml
	}
	return cluster.NewMover(log, hex.EncodeToString(id[:]))
}

// moveLease is how long a MIGRATE of timeout holds the group's move lease:
// its longest run (the exchange, the resend, each bounded by timeout; the
// take and the settle, each a log write bounded by the no-leader timeout)
// with a margin. A MIGRATE whose node dies leaves it to lapse that long.
func moveLease(timeout time.Duration) time.Duration { return 3*timeout + 30*time.Second }

// moveWait is how long a MIGRATE or ABORTMOVE waits for the group's move
// lease held by another: at least 5 s, or its own timeout.
func moveWait(timeout time.Duration) time.Duration { return max(timeout, 5*time.Second) }

// runMove runs fn holding the group's move lease (see moveLease): two
// MIGRATEs or ABORTMOVEs sent to two nodes of one group run one after the
// other, as on one node. A lease still held by another after moveWait is
// refused with TRYAGAIN.
func (c *Conn) runMove(timeout time.Duration, fn func() error) error {
	// A refusal is a *cluster.MoveBusyError, worded in errors.go.
	return c.srv.mover.Run(c.srv.ctx, moveLease(timeout), moveWait(timeout), fn)
}

// targetError is an error reply of MIGRATE's target, relayed as Redis does.
func targetError(msg string) error {
	return &textError{"ERR Target instance replied with error: " + msg}
}

// decodeDumpError words a DecodeDump failure as RESTORE answers it.
func decodeDumpError(err error) error {
	if errors.Is(err, snapshot.ErrDumpNotCellserver) {
		return &textError{"ERR DUMP payload is not a cellserver payload (Redis RDB payloads cannot be restored into cellserver)"}
	}
	return &textError{"ERR DUMP payload version or checksum are wrong"}
}

// migrateKeys appends MIGRATE's keys to dst: its key argument, or the
// arguments after KEYS when the key argument is empty. The options before
// KEYS are skipped with their values (an AUTH password may read "keys").
func migrateKeys(dst [][]byte, args [][]byte) [][]byte {
	if len(args) < 6 {
		return dst
	}
	if len(args[3]) > 0 {
		return append(dst, args[3])
	}
	for i := 6; i < len(args); i++ {
		switch strings.ToLower(string(args[i])) {
		case "auth":
			i++
		case "auth2":
			i += 2
		case "keys":
			return append(dst, args[i+1:]...)
		}
	}
	return dst
}

// migrateArgs is a parsed MIGRATE call.
type migrateArgs struct {
	addr          string
	db            int64
	timeout       time.Duration
	copy, replace bool
	auth          [][]byte // AUTH password or AUTH2 username password
	keys          [][]byte
}

// parseMigrate parses MIGRATE host port key|"" destination-db timeout
// [COPY] [REPLACE] [AUTH password | AUTH2 username password] [KEYS key ...].
func parseMigrate(args [][]byte) (*migrateArgs, error) {
	m := &migrateArgs{addr: net.JoinHostPort(string(args[1]), string(args[2]))}
	var err error
	if m.db, err = engine.ParseInt(args[4]); err != nil {
		return nil, err
	}
	ms, err := engine.ParseInt(args[5])
	if err != nil {
		return nil, err
	}
	if ms <= 0 {
		ms = 1000 // Redis's default
	}
	m.timeout = time.Duration(min(ms, int64(time.Hour/time.Millisecond))) * time.Millisecond
	keysAt := -1
	for i := 6; i < len(args) && keysAt < 0; i++ {
		switch strings.ToLower(string(args[i])) {
		case "copy":
			m.copy = true
		case "replace":
			m.replace = true
		case "auth":
			if i+1 >= len(args) {
				return nil, engine.ErrSyntax
			}
			m.auth = [][]byte{args[i+1]}
			i++
		case "auth2":
			if i+2 >= len(args) {
				return nil, engine.ErrSyntax
			}
			m.auth = [][]byte{args[i+1], args[i+2]}
			i += 2
		case "keys":
			if len(args[3]) != 0 {
				return nil, errMigrateKeysArg
			}
			keysAt = i + 1
		default:
			return nil, engine.ErrSyntax
		}
	}
	// A key named twice is sent once.
	seen := map[string]bool{}
	for _, k := range migrateKeys(nil, args) {
		if !seen[string(k)] {
			seen[string(k)] = true
			m.keys = append(m.keys, k)
		}
	}
	return m, nil
}

// target is MIGRATE's target (cluster.Target) over internal/respclient:
// every reply bounded in size and due within the call's timeout.
type target struct {
	c *Conn
	m *migrateArgs
}

// Restore dials the target at addr, authenticates, selects the database
// and restores every key (ASKING before each RESTORE in a cluster, so
// that a group importing the slot takes it; an error answering ASKING is
// ignored, as a standalone server gives one and still restores), marking
// those it took, those it refused and those whose outcome is unknown (an
// I/O failure or a reply that is not RESP once the RESTOREs were sent),
// each with its failure. It returns the first failure.
func (t target) Restore(addr string, timeout time.Duration, keys []cluster.MoveKey) error {
	err := t.c.exchange(addr, t.m, timeout, keys)
	if err != nil {
		for i := range keys {
			if !keys[i].Restored && keys[i].Err == nil {
				keys[i].Err = err
				keys[i].Retry = err == errMigrateConnect
			}
		}
	}
	return err
}

// exchange is Restore's exchange with the target: it marks the keys
// restored, unknown or refused (with their own refusal) and returns the
// first failure.
func (c *Conn) exchange(addr string, m *migrateArgs, timeout time.Duration, keys []cluster.MoveKey) error {
	cfg := respclient.Config{Timeout: timeout, MaxArray: 64}
	switch len(m.auth) {
	case 1:
		cfg.Password = string(m.auth[0])
	case 2:
		cfg.Username, cfg.Password = string(m.auth[0]), string(m.auth[1])
	}
	cl, err := respclient.Dial(c.srv.ctx, addr, cfg)
	if err != nil {
		var re *respclient.ReplyError
		if errors.As(err, &re) {
			return targetError(re.Msg)
		}
		return errMigrateConnect
	}
	defer cl.Close()
	if m.db != 0 {
		v, err := cl.Do([]byte("SELECT"), strconv.AppendInt(nil, m.db, 10))
		if err != nil {
			return migrateIOError(err)
		}
		if v.Kind == respclient.Error {
			return targetError(v.Str)
		}
	}
	asking := c.srv.cfg.Cluster != nil
	for _, k := range keys {
		if asking {
			cl.Send([]byte("ASKING"))
		}
		args := [][]byte{[]byte("RESTORE"), k.Key, []byte("0"), k.Payload}
		if k.Replace {
			args = append(args, []byte("REPLACE"))
		}
		cl.Send(args...)
	}
	for i := range keys {
		keys[i].Unknown = true
	}
	if err := cl.Flush(); err != nil {
		return errMigrateWrite
	}
	var first error
	for i := range keys {
		if asking {
			if _, err := cl.Read(); err != nil {
				return migrateIOError(err)
			}
		}
		v, err := cl.Read()
		if err != nil {
			return migrateIOError(err)
		}
		switch v.Kind {
		case respclient.Simple:
			keys[i].Unknown = false
			keys[i].Restored = true
		case respclient.Error:
			refusal := v.Err()
			if errors.Is(refusal, respclient.ErrBusyKey) && (keys[i].Again || keys[i].Home) {
				// Sent again, or to a group importing the slot from
				// this one: the target has the key, so a RESTORE of it
				// from here landed (an earlier MIGRATE's, an earlier
				// attempt of this one, or another node's at the same
				// time; while a key is in flight here nobody is sent
				// there to create it). Done; never REPLACE it: clients
				// may have used it there since.
				keys[i].Unknown, keys[i].Restored = false, true
				continue
			}
			// A refusal leaves the key here, except one that may have
			// been applied (TRYAGAIN Leadership changed …) or whose
			// outcome a group without a leader cannot tell: those keys
			// stay in flight, like a lost reply.
			keys[i].Unknown = errors.Is(refusal, respclient.ErrTryAgain) || errors.Is(refusal, respclient.ErrClusterDown)
			keys[i].Retry = keys[i].Unknown
			keys[i].Err = targetError(v.Str)
			if first == nil {
				first = targetError(v.Str)
			}
		default:
			// Not RESTORE's answer: not a cellserver, and what it did
			// with the key is unknown.
			return errMigrateRead
		}
	}
	return first
}

// migrateIOError words a failure of the exchange with the target: a write
// or a read (a reply that is not RESP, too large or late counts as one).
func migrateIOError(err error) error {
	var ioe *respclient.IOError
	if errors.As(err, &ioe) && ioe.Op == "write" {
		return errMigrateWrite
	}
	return errMigrateRead
}

// moveKeyspace is the group's keyspace as a cluster.Migration sees it,
// through the connection running MIGRATE (its read barrier, its writes
// and their redirections).
type moveKeyspace struct{ c *Conn }

func (k moveKeyspace) ReadNow() error {
	_, err := k.c.readNow()
	return err
}

func (k moveKeyspace) Moving(key []byte) (engine.State, bool) {
	return k.c.srv.backend.Store().Moving(key)
}

func (k moveKeyspace) Write(ops []shards.Op) error { return k.c.writeOps(ops) }

// migrate runs MIGRATE: COPY sends the keys' states; otherwise the keys
// move (cluster.Migration). It answers OK, NOKEY or the failure.
func (c *Conn) migrate(m *migrateArgs) error {
	if len(m.keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if m.copy {
		return c.migrateCopy(m)
	}
	mg := &cluster.Migration{Addr: m.addr, Timeout: m.timeout, Replace: m.replace, Keys: m.keys,
		Keyspace: moveKeyspace{c}, Target: target{c, m}, Done: c.srv.ctx.Done()}
	if cl := c.srv.cfg.Cluster; cl != nil {
		mg.Routing, mg.MoveDest = cl.Routing, cl.MoveDest
	}
	// One MIGRATE at a time per group (the move lease, through the
	// group's log), and the keys already in flight read after a read
	// barrier: a key an earlier MIGRATE left in flight is never put back
	// by this one (its RESTORE may have landed). The take's Exclusive
	// OpMoveOut still decides which MIGRATE owns a key should a lease
	// lapse.
	var sent int
	err := c.runMove(m.timeout, func() error {
		var err error
		sent, err = mg.Run()
		return err
	})
	switch {
	case err != nil:
		return err
	case sent == 0:
		c.WriteSimple("NOKEY")
	default:
		c.WriteOK()
	}
	return nil
}

// migrateCopy runs MIGRATE ... COPY: the target gets a copy of each live
// key's state, the source keeps its own.
func (c *Conn) migrateCopy(m *migrateArgs) error {
	var keys []cluster.MoveKey
	for _, k := range m.keys {
		st, ok, err := c.lookup(k)
		if err != nil {
			return err
		}
		if ok {
			keys = append(keys, cluster.MoveKey{Key: k, Payload: snapshot.EncodeDump(&st), Replace: m.replace})
		}
	}
	if len(keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if err := (target{c, m}).Restore(m.addr, m.timeout, keys); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

// writeOne submits one op and returns its error.
func (c *Conn) writeOne(op shards.Op) error {
	return c.writeOps([]shards.Op{op})
}

// writeOps submits ops in one Backend.Write and returns the first error.
func (c *Conn) writeOps(ops []shards.Op) error {
	if len(ops) == 0 {
		return nil
	}
	res := make([]shards.Result, len(ops))
	err := c.srv.backend.Write(c.srv.ctx, ops, res)
	c.now = 0
	if err != nil {
		return err
	}
	for i := range res {
		if res[i].Err != nil {
			return c.redirect(res[i].Err, ops[i].Keys)
		}
	}
	return nil
}

// prepareRestore parses RESTORE key ttl serialized-value [REPLACE]
// [ABSTTL] [IDLETIME seconds] [FREQ frequency] into op.
func prepareRestore(args [][]byte, op *shards.Op) error {
	ttl, err := engine.ParseInt(args[2])
	if err != nil {
		return err
	}
	if ttl < 0 {
		return &textError{"ERR Invalid TTL value, must be >= 0"}
	}
	op.Replace = false
	for i := 4; i < len(args); i++ {
		switch strings.ToLower(string(args[i])) {
		case "replace":
			op.Replace = true
		case "absttl":
		case "idletime", "freq":
			if i+1 >= len(args) {
				return engine.ErrSyntax
			}
			if err := checkRestoreOption(args[i], args[i+1]); err != nil {
				return err
			}
			i++
		default:
			return engine.ErrSyntax
		}
	}
	st, err := snapshot.DecodeDump(args[3])
	if err != nil {
		return decodeDumpError(err)
	}
	op.Code = shards.OpRestore
	op.Keys = append(op.Keys, args[1])
	op.State = st
	return nil
}

// checkRestoreOption checks the value of RESTORE's IDLETIME or FREQ
// (name), accepted and ignored, as Redis does.
func checkRestoreOption(name, value []byte) error {
	v, err := engine.ParseInt(value)
	if err != nil {
		return err
	}
	if strings.EqualFold(string(name), "freq") {
		if v < 0 || v > 255 {
			return &textError{"ERR Invalid FREQ value, must be >= 0 and <= 255"}
		}
	} else if v < 0 {
		return &textError{"ERR Invalid IDLETIME value, must be >= 0"}
	}
	return nil
}

func migrateCommands() []*Command {
	return []*Command{
		{
			Name: "dump", Arity: 2, Flags: FlagReadonly, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Group: "generic", Summary: "Returns a key's limiter state as a payload RESTORE accepts.",
			Complexity: "O(1), O(N) for a sliding log of N entries",
			Args:       []Arg{{Name: "key", Type: "key"}},
			Reply: "Bulk string: cellserver's DUMP payload (a magic `\\xceCELL`, a version byte, the state with its absolute expiry, and a CRC-32C), " +
				"which only cellserver's `RESTORE` reads; nil when the key does not exist (or is being moved out by `MIGRATE`).",
			Handler: func(c *Conn, args [][]byte) error {
				st, ok, err := c.lookup(args[1])
				if err != nil {
					return err
				}
				if !ok {
					c.WriteNull()
					return nil
				}
				c.WriteBulk(snapshot.EncodeDump(&st))
				return nil
			},
		},
		{
			Name: "restore", Arity: -4, Flags: FlagWrite | FlagDenyOOM, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Group: "generic", Summary: "Creates a key from a DUMP payload.",
			Complexity: "O(1), O(N) for a sliding log of N entries",
			Args: []Arg{{Name: "key", Type: "key"}, {Name: "ttl", Type: "integer", Doc: "accepted and ignored: the key expires when its limiter state says"},
				{Name: "serialized-value", Type: "string"},
				{Name: "replace", Type: "pure-token", Token: "REPLACE", Optional: true},
				{Name: "absttl", Type: "pure-token", Token: "ABSTTL", Optional: true, Doc: "accepted and ignored"},
				{Name: "seconds", Type: "integer", Token: "IDLETIME", Optional: true, Doc: "accepted and ignored"},
				{Name: "frequency", Type: "integer", Token: "FREQ", Optional: true, Doc: "accepted and ignored"}},
			Reply: "Simple string `OK`. A state that has expired by now stores nothing (with `REPLACE` the key is then deleted).",
			Errors: []string{"`BUSYKEY Target key name already exists.` for an existing key without `REPLACE`.",
				"`ERR DUMP payload is not a cellserver payload (Redis RDB payloads cannot be restored into cellserver)` for any payload not made by cellserver's `DUMP`.",
				"`ERR DUMP payload version or checksum are wrong` for a cellserver payload that is damaged or of a version this build does not read.",
				"`ERR Invalid TTL value, must be >= 0` for a negative ttl.",
				"`TRYAGAIN Key is being migrated, retry` for a key `MIGRATE` is moving out of this group."},
			Notes: []string{"The ttl argument is accepted and ignored: a limiter key's expiry follows from its state (the instant it is fresh again), which the payload carries as an absolute time, so the restored key expires when the dumped one would have."},
			Prepare: func(c *Conn, args [][]byte, op *shards.Op) error {
				return prepareRestore(args, op)
			},
			Finish: func(c *Conn, _ [][]byte, _ *shards.Result) { c.WriteOK() },
		},
		{
			Name: "migrate", Arity: -6, Flags: FlagWrite, FirstKey: 3, LastKey: 3, KeyStep: 1, MovableKeys: migrateKeys, OpenSlot: true,
			Group: "generic", Summary: "Moves keys to another cellserver (resharding), atomically per key.",
			Complexity: "O(N) where N is the number of keys, plus a round trip to the target",
			Args: []Arg{{Name: "host", Type: "string"}, {Name: "port", Type: "integer"},
				{Name: "key-selector", Type: "oneof", Args: []Arg{{Name: "key", Type: "key"}, {Name: "empty-string", Type: "pure-token", Token: `""`}}},
				{Name: "destination-db", Type: "integer", Doc: "0 (a database other than 0 is selected on the target, which refuses it)"},
				{Name: "timeout", Type: "integer", Doc: "milliseconds for the connection and each exchange with the target (0 or less: 1000)"},
				{Name: "copy", Type: "pure-token", Token: "COPY", Optional: true},
				{Name: "replace", Type: "pure-token", Token: "REPLACE", Optional: true},
				{Name: "authentication", Type: "oneof", Optional: true, Args: []Arg{
					{Name: "password", Type: "string", Token: "AUTH"},
					{Name: "username-password", Type: "block", Token: "AUTH2", Args: []Arg{{Name: "username", Type: "string"}, {Name: "password", Type: "string"}}}}},
				{Name: "key", Type: "key", Token: "KEYS", Optional: true, Multiple: true}},
			Reply: "Simple string `OK` when every key that exists reached the target, `NOKEY` when none of them exists.",
			Errors: []string{"`IOERR error or timeout connecting to the client`: no key moved.",
				"`IOERR error or timeout writing to target instance` or `IOERR error or timeout reading to target instance`: the keys the target confirmed moved; those it refused stay here; " +
					"those whose reply did not come whole within the timeout, or was not RESP (a server that is not a cellserver), may or may not be on the target, so they stay in flight here (answering `TRYAGAIN`) " +
					"until a `MIGRATE` naming them again completes the move or `CLUSTER ABORTMOVE` puts them back; the error then ends with `; <n> key(s) are in flight: …`.",
				"`ERR Target instance replied with error: <error>` when the target refused `AUTH`, `SELECT` or a `RESTORE` (for example `BUSYKEY` without `REPLACE`): the keys it did not take stay here. " +
					"A `TRYAGAIN` or `CLUSTERDOWN` answer to a `RESTORE` (the target group lost its leader: the key may have been applied) is sent again first (see the notes); a key still so answered stays in flight, and the error says so as above.",
				"`ERR When using MIGRATE KEYS option, the key argument must be set to the empty string`.",
				"`TRYAGAIN Key is being migrated, retry` for a key another `MIGRATE` is moving.",
				"`TRYAGAIN another MIGRATE or CLUSTER ABORTMOVE of this group is running (<holder>): retry once it is done` when another node (or connection) of the group still holds the group's move lease after this `MIGRATE` waited its timeout (at least 5 s) for it; nothing moved.",
				"`ERR key <key> is in flight to <address>, a member of group <name>: …` when a key an earlier `MIGRATE` left in flight to a member of one group is sent to another group (it could land in both); nothing moves."},
			Notes: []string{"A group runs one `MIGRATE` (without `COPY`) or `CLUSTER ABORTMOVE` at a time, whichever of its nodes each is sent to: each holds the group's move lease, taken and dropped through the group's log, and another waits for it. " +
				"So two `MIGRATE`s of one key sent to two nodes at once run one after the other and the key ends in one place. The lease of a node that dies mid-`MIGRATE` lapses after three times its timeout plus 30 s.",
				"Each key moves atomically: it first leaves this server's keyspace (while in flight every command on it answers `TRYAGAIN`), then the target restores it " +
					"(after `ASKING` in a cluster), and only then is it dropped here; a key the target did not take comes back unchanged. Its limiter state exists in exactly one place at every instant, " +
					"so a key exhausted before the move is exhausted after it and no instant exists at which both servers admit for it. A key left in flight by a MIGRATE that failed midway is sent again by the next MIGRATE naming it; " +
					"if the target answers `BUSYKEY`, the earlier `RESTORE` had landed and the move is complete (without `REPLACE`, so uses of the key on the target since then are kept). " +
					"So does a `BUSYKEY` from a group that imports the slot from this one: the key can only have come from this group.",
				"With `COPY` the target gets a copy of each key's state and this server keeps its own: from then on the two limiters are independent, and each admits up to the key's bound.",
				"The keys move to a cellserver only: the payload is cellserver's `DUMP` payload, which Redis does not read.",
				"In a cluster, `MIGRATE` runs on a node of either group of an open slot (migrating or importing), as Redis Cluster allows, so keys can be moved back to the source; " +
					"the target may be any member of the importing group (a follower forwards the `RESTORE`, with its `ASKING`, to its leader). An error answering `ASKING` is ignored (a standalone cellserver gives one, and restores).",
				"To a member of the group the slot moves to (it imports the slot from this group, or this group migrates it there), each `RESTORE` goes without `REPLACE`, whatever `MIGRATE` says: " +
					"that group holds a key of the slot only if it came from here, so its copy is the one clients used since, and `BUSYKEY` means the key landed. " +
					"A `RESTORE` that member answers with `TRYAGAIN` or `CLUSTERDOWN` (its group changed leader, or has none yet) is sent again, to the same member (a deposed leader forwards it to the new one), " +
					"and keys that could not be sent because the member refused the connection go to the group's next member, for up to one more timeout. So a leader change in the target group costs `MIGRATE` a retry, not an abandoned move. " +
					"A `RESTORE` whose reply did not come within the timeout (a stopped member) is not sent again by the same `MIGRATE`: it may still land, so its key stays in flight until the next `MIGRATE` naming it."},
			Handler: func(c *Conn, args [][]byte) error {
				m, err := parseMigrate(args)
				if err != nil {
					return err
				}
				return c.migrate(m)
			},
		},
	}
}

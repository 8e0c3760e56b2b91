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
	errMigrateWrite   = errors.New("error or timeout writing to target instance")
	errMigrateRead    = errors.New("error or timeout reading from target instance")
	errMigrateKeysArg = errors.New("MIGRATE KEYS needs an empty key argument")
	// RESTORE's refusals.
	errDumpForeign = errors.New("DUMP payload is not cellserver's")
	errDumpBad     = errors.New("DUMP payload version or checksum are wrong")
	errRestoreTTL  = errors.New("invalid TTL value")
	errRestoreFreq = errors.New("invalid FREQ value")
	errRestoreIdle = errors.New("invalid IDLETIME value")
)

// newMover returns the server's Mover: over the group's log in a cluster
// (its Cluster is a cluster.MoveLog, as replication.ClusterView is), over a lease in
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

// targetError is an error reply of MIGRATE's target, relayed as Redis does
// (targetReplyError, worded in errors.go).
func targetError(msg string) error { return &targetReplyError{msg} }

// decodeDumpError words a DecodeDump failure as RESTORE answers it.
func decodeDumpError(err error) error {
	if errors.Is(err, snapshot.ErrDumpNotCellserver) {
		return errDumpForeign
	}
	return errDumpBad
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
		return errRestoreTTL
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
			return errRestoreFreq
		}
	} else if v < 0 {
		return errRestoreIdle
	}
	return nil
}

func dumpHandler(c *Conn, args [][]byte) error {
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
}

func restorePrepare(c *Conn, args [][]byte, op *shards.Op) error {
	return prepareRestore(args, op)
}

func restoreFinish(c *Conn, _ [][]byte, _ *shards.Result) { c.WriteOK() }

func migrateHandler(c *Conn, args [][]byte) error {
	m, err := parseMigrate(args)
	if err != nil {
		return err
	}
	return c.migrate(m)
}

package resp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"

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

// RESTORE's refusals, worded in errors.go (MIGRATE's are cluster's:
// cluster/target.go).
var (
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

// decodeDumpError words a DecodeDump failure as RESTORE answers it.
func decodeDumpError(err error) error {
	if errors.Is(err, snapshot.ErrDumpNotCellserver) {
		return errDumpForeign
	}
	return errDumpBad
}

// dialTarget is MIGRATE's cluster.Dialer: the RESP client.
func dialTarget(ctx context.Context, addr string, cfg respclient.Config) (cluster.TargetConn, error) {
	return respclient.Dial(ctx, addr, cfg)
}

// target returns m's target over RESP (ASKING before each RESTORE in a
// cluster).
func (c *Conn) target(m *cluster.MigrateArgs) cluster.RESPTarget {
	return cluster.RESPTarget{Ctx: c.srv.ctx, Dial: dialTarget, Args: m, Asking: c.srv.cfg.Cluster != nil}
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
func (c *Conn) migrate(m *cluster.MigrateArgs) error {
	if len(m.Keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if m.Copy {
		return c.migrateCopy(m)
	}
	mg := &cluster.Migration{Addr: m.Addr, Timeout: m.Timeout, Replace: m.Replace, Keys: m.Keys,
		Keyspace: moveKeyspace{c}, Target: c.target(m), Done: c.srv.ctx.Done()}
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
	err := c.srv.mover.RunFor(c.srv.ctx, m.Timeout, func() error {
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
func (c *Conn) migrateCopy(m *cluster.MigrateArgs) error {
	var keys []cluster.MoveKey
	for _, k := range m.Keys {
		st, ok, err := c.lookup(k)
		if err != nil {
			return err
		}
		if ok {
			keys = append(keys, cluster.MoveKey{Key: k, Payload: snapshot.EncodeDump(&st), Replace: m.Replace})
		}
	}
	if len(keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if err := c.target(m).Restore(m.Addr, m.Timeout, keys); err != nil {
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
	m, err := cluster.ParseMigrate(args)
	if err != nil {
		return err
	}
	return c.migrate(m)
}

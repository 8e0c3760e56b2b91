package resp

import (
	"context"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/respclient"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// DUMP, RESTORE and MIGRATE: a key's limiter state leaves one server and
// arrives at another as a DUMP payload (snapshot.EncodeDump). MIGRATE's
// arguments, phases and exchange with the target are cluster's
// (cluster/DESIGN.md); its handler here parses, runs and answers.

// newMover returns the server's Mover: over the group's log in a cluster
// (its Cluster is a cluster.MoveLog, as replication.ClusterView is).
func newMover(cl Cluster) *cluster.Mover {
	log, _ := cl.(cluster.MoveLog)
	return cluster.NewGroupMover(log)
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

// connKeyspace is the group's keyspace as a cluster.Migration and a
// cluster.Abort see it, through the connection running MIGRATE or CLUSTER
// ABORTMOVE: its read barrier, the moving set, its writes and their
// redirections.
type connKeyspace struct{ c *Conn }

func (k connKeyspace) ReadNow() error {
	_, err := k.c.readNow()
	return err
}

func (k connKeyspace) Moving(key []byte) (engine.State, bool) {
	return k.c.srv.backend.Store().Moving(key)
}

func (k connKeyspace) MovingKeys(fn func(key []byte, st engine.State) bool) {
	k.c.srv.backend.Store().MovingKeys(fn)
}

func (k connKeyspace) Write(ops []shards.Op) error { return k.c.writeOps(ops) }

// PutBack puts keys in flight back into the keyspace (one OpMoveAbort)
// and returns how many it put back.
func (k connKeyspace) PutBack(keys [][]byte) (int64, error) {
	ops := []shards.Op{{Code: shards.OpMoveAbort, Keys: keys}}
	res := make([]shards.Result, 1)
	err := k.c.srv.backend.Write(k.c.srv.ctx, ops, res)
	k.c.now = 0
	if err == nil {
		err = res[0].Err
	}
	return res[0].N, err
}

// migrate runs MIGRATE: COPY sends the keys' states; otherwise the keys
// move (cluster.Migration). It returns how many keys it sent (0: NOKEY).
func (c *Conn) migrate(m *cluster.MigrateArgs) (int, error) {
	if len(m.Keys) == 0 {
		return 0, nil
	}
	if m.Copy {
		return c.migrateCopy(m)
	}
	mg := &cluster.Migration{Addr: m.Addr, Timeout: m.Timeout, Replace: m.Replace, Keys: m.Keys,
		Keyspace: connKeyspace{c}, Target: c.target(m), Done: c.srv.ctx.Done()}
	if cl := c.srv.cfg.Cluster; cl != nil {
		mg.Routing, mg.MoveDest = cl.Routing, cl.MoveDest
	}
	// One MIGRATE at a time per group: the move lease (DESIGN.md).
	var sent int
	err := c.srv.mover.RunFor(c.srv.ctx, m.Timeout, func() error {
		var err error
		sent, err = mg.Run()
		return err
	})
	return sent, err
}

// migrateCopy runs MIGRATE ... COPY: the target gets a copy of each live
// key's state, the source keeps its own.
func (c *Conn) migrateCopy(m *cluster.MigrateArgs) (int, error) {
	var keys []cluster.MoveKey
	for _, k := range m.Keys {
		st, ok, err := c.lookup(k)
		if err != nil {
			return 0, err
		}
		if ok {
			keys = append(keys, cluster.MoveKey{Key: k, Payload: snapshot.EncodeDump(&st), Replace: m.Replace})
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	return len(keys), c.target(m).Restore(m.Addr, m.Timeout, keys)
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

func restorePrepare(_ *Conn, args [][]byte, op *shards.Op) error {
	return cluster.PrepareRestore(args, op)
}

func restoreFinish(c *Conn, _ [][]byte, _ *shards.Result) { c.WriteOK() }

// migrateKeys are MIGRATE's key positions (cluster.MigrateKeys), for the
// command table.
func migrateKeys(dst, args [][]byte) [][]byte { return cluster.MigrateKeys(dst, args) }

func migrateHandler(c *Conn, args [][]byte) error {
	m, err := cluster.ParseMigrate(args)
	if err != nil {
		return err
	}
	switch sent, err := c.migrate(m); {
	case err != nil:
		return err
	case sent == 0:
		c.WriteSimple("NOKEY")
	default:
		c.WriteOK()
	}
	return nil
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/shards"
)

// Membership commands of the wire layer, routed to the Members methods
// (Node.Members) named beside each. A new node sends CmdJoin to Config.Join over RESP; nodes
// that are members reach the leader through the forwarding service on the
// raft port instead (service.go).
const (
	// CmdJoin adds a member: RAFT.JOIN id raft-addr resp-addr → Join.
	CmdJoin = "RAFT.JOIN"
	// CmdRemove removes a member: RAFT.REMOVE id → Remove.
	CmdRemove = "RAFT.REMOVE"
)

// Node is one member of a raft-replicated cellserver cluster. It implements
// the wire layer's backend: Write replicates operations through the log and
// returns once they are committed and applied; ReadNow confirms a read may
// be served and gives the instant to evaluate it at; Store is the local
// keyspace, which only the FSM writes.
//
// All methods are safe for concurrent use. Close stops every goroutine the
// Node started.
type Node struct {
	cfg Config
	log *slog.Logger
	// raftLog is the sink of raft's log lines (nil with RaftLogOutput).
	raftLog  *raftSink
	clock    func() int64
	store    *shards.Store
	fsm      *FSM
	raft     *raft.Raft
	trans    *raft.NetworkTransport
	stream   *tcpStream
	logStore *logStore
	fwd      *forwarder
	// forwardTarget gives the address forwarded requests go to: leaderRaft
	// (tests point it elsewhere before any request).
	forwardTarget func() (string, bool)
	verify        verifier

	queue    chan *pending
	inflight chan *flight
	slots    chan struct{} // one per entry or forwarded batch in flight
	ctx      context.Context
	cancel   context.CancelFunc
	// raftStopped is closed once raft has shut down (Close): futures it
	// has not answered by then never will be (futureError).
	raftStopped chan struct{}
	wg          sync.WaitGroup
	closed      sync.Once
	closeErr    error

	leadMu        sync.Mutex
	leadChange    chan struct{} // closed and replaced on every leader change; guarded by leadMu
	ready         atomic.Bool   // leader, and every entry of earlier terms applied
	leadGen       atomic.Uint64 // bumped on every own leadership change
	leaderChanges atomic.Uint64

	stampMu   sync.Mutex
	lastStamp int64  // last stamped or read time; guarded by stampMu
	seq       uint64 // entries submitted; guarded by stampMu
	done      watermark

	encBuf []byte // encoding buffer of the run goroutine

	// origin identifies this Node's entries in the log (with their seq:
	// entryID); random, so that no other node or earlier run of this one
	// shares it.
	origin uint64
	ownMu  sync.Mutex
	own    map[uint64]*flight // submitted entries not yet answered, by seq; guarded by ownMu

	// The Node's concerns other than the write path, each a type of its
	// own holding the Node (no type carries more than 40 methods):
	// mship is the membership state — the leader's view of every member,
	// whether this node was removed — and the autopilot that keeps it
	// (autopilot.go); members joins, removes and moves members
	// (membership.go, identity.go); clusterSlots changes the group's
	// slots and move lease (slots.go); boot opens the raft state and finds
	// or forms the group (bootstrap.go, recover.go); gid keeps the group
	// id (groupid.go); svc serves the forwarding service (service.go);
	// lead follows leadership and runs changes on the leader; reads
	// serves linearizable reads (node.go).
	mship        membership
	members      Members
	clusterSlots Slots
	boot         bootstrap
	gid          groupIDs
	svc          forwardService
	lead         leadership
	reads        reads

	// dir and routing are the cluster of groups as this node knows it
	// (directory.go); routingMu serialises rebuilds.
	dir       Directory
	routing   atomic.Pointer[cluster.Routing]
	routingMu sync.Mutex
	started   atomic.Bool // n.raft is set (the FSM may run before)
	learning  atomic.Bool // a learnAsync round is running

	batches     atomic.Uint64
	batchedOps  atomic.Uint64
	commitNanos atomic.Uint64 // total time from raft.Apply to applied, over every submitted entry
}

// NewNode opens (or creates) the raft state under cfg.Dir, starts the raft
// transport on cfg.RaftAddr and the node's goroutines, and bootstraps or
// joins as configured. store is the keyspace the FSM applies to; it should
// be empty (a restart restores it from the snapshot and log). log may be nil.
func NewNode(cfg Config, store *shards.Store, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("node", cfg.NodeID)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replication: create %s: %w", cfg.Dir, err)
	}
	n := &Node{
		cfg:        cfg,
		log:        log,
		clock:      cfg.Clock,
		store:      store,
		queue:      make(chan *pending, 4096),
		inflight:   make(chan *flight, cfg.MaxInflight),
		slots:      make(chan struct{}, cfg.MaxInflight),
		leadChange: make(chan struct{}),
		own:        map[uint64]*flight{},
		origin:     rand.Uint64() | 1,
		lastStamp:  math.MinInt64,
	}
	n.mship.n, n.members.n, n.clusterSlots.n, n.boot.n = n, n, n, n
	n.gid.n, n.svc.n, n.lead.n, n.reads.n = n, n, n, n
	n.forwardTarget = n.lead.leaderRaft
	n.fwd = newForwarder(cfg.ForwardPool, cfg.NoLeaderTimeout+5*time.Second, func(ctx context.Context, addr string) (net.Conn, error) {
		return n.stream.dial(ctx, addr, headerForward)
	})
	n.fsm = NewFSM(store, n.deliverApplied, log)
	n.fsm.group = cfg.Group
	n.fsm.onCluster = n.dir.clusterChanged
	n.fsm.onSetting = cfg.OnSetting
	n.fsm.onGroupID = n.gid.storeGroupID
	n.dir = newDirectory(n)
	if n.clock == nil {
		n.clock = func() int64 { return time.Now().UnixNano() }
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.raftStopped = make(chan struct{})
	if err := n.boot.open(); err != nil {
		n.cancel()
		n.boot.shutdownStores()
		return nil, err
	}
	n.verify.r = n.raft

	n.wg.Add(4)
	go n.run()
	go n.complete()
	go n.lead.watchLeadership()
	n.wg.Add(4)
	go n.dir.directoryLoop()
	go n.mship.autopilot()
	go n.mship.watchMembership()
	go n.flushRaftLog()
	go func() {
		defer n.wg.Done()
		if cfg.SweepInterval > 0 {
			// Active expiry runs at the last applied stamped time, never
			// the local clock, so that every replica deletes the same keys
			// at the same point of the log.
			n.store.RunSweeper(n.ctx, n.fsm.LastTime, cfg.SweepInterval)
		}
	}()
	return n, nil
}

func (bt *bootstrap) open() error {
	n := bt.n
	cfg := &n.cfg
	rc, sink := cfg.raftConfig(n.log)
	n.raftLog = sink
	var err error
	n.logStore, err = openLogStore(cfg, rc.Logger, n.log)
	if err != nil {
		return err
	}
	if err := n.gid.loadGroupState(); err != nil {
		return err
	}
	cache, err := raft.NewLogCache(1024, n.logStore.logs)
	if err != nil {
		return fmt.Errorf("replication: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, rc.Logger.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("replication: open snapshot store: %w", err)
	}
	sec := newSecurity(cfg)
	sec.groupID = n.gid.groupID // raft connections refuse another group's log (auth.go)
	n.stream, err = newTCPStream(cfg.RaftAddr, cfg.RaftAdvertise, sec, n.log,
		acceptLimits{timeout: cfg.HandshakeTimeout, max: cfg.MaxHandshakes})
	if err != nil {
		return fmt.Errorf("replication: listen on %s: %w", cfg.RaftAddr, err)
	}
	n.stream.dialer = newDialer(cfg.Resolver, n.log) // before raft's first dial
	n.trans = raft.NewNetworkTransportWithLogger(n.stream, 3, 10*time.Second, rc.Logger.Named("net"))
	hasState, err := raft.HasExistingState(cache, n.logStore.stable, snaps)
	if err != nil {
		return fmt.Errorf("replication: inspect raft state: %w", err)
	}
	// A peers.json left by the operator replaces the configuration before
	// raft starts (recover.go).
	if _, err := bt.recoverFromPeersFile(rc, cache, n.logStore.stable, snaps, hasState); err != nil {
		return err
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, cache, n.logStore.stable, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("replication: start raft: %w", err)
	}
	n.started.Store(true)
	n.stream.handle(n.svc.serveForward)
	alone := cfg.bootstrapsAlone()
	peers := cfg.joinPeers()
	switch {
	case hasState:
		n.log.Info("replication: restarting from existing raft state", "dir", cfg.Dir)
		// Restarted at another address, it has the leader record the new
		// one (identity.go).
		n.wg.Add(1)
		go n.members.followAddress()
	case alone && len(peers) == 0:
		// The only case that bootstraps without asking anyone: a wiped
		// node started this way forks its cluster (docs/cluster.md).
		c := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: n.trans.LocalAddr(),
		}}}
		switch err := n.raft.BootstrapCluster(c).Error(); {
		case err == nil:
			n.gid.markOwnLog()
		case !errors.Is(err, raft.ErrCantBootstrap):
			return fmt.Errorf("replication: bootstrap: %w", err)
		}
		n.log.Info("replication: bootstrapped a new cluster", "servers", cfg.NodeID)
	case len(peers) > 0:
		// Join, or bootstrap only once the peers agree (bootstrap.go).
		n.wg.Add(1)
		go bt.discoverLoop()
	}
	return nil
}

// deliverApplied is the FSM's hand-off: when id is that of an entry this
// node submitted and still answers for, it fans the results out to the
// callers (copying them) and reports true. Entries other nodes submitted
// carry another origin and never match. Taking the flight out of n.own
// under ownMu makes the answer exactly-once: complete fails only the
// flights the FSM did not take.
func (n *Node) deliverApplied(id []byte, res []shards.Result, err error) bool {
	origin, seq, ok := decodeEntryID(id)
	if !ok || origin != n.origin {
		return false
	}
	n.ownMu.Lock()
	fl := n.own[seq]
	delete(n.own, seq)
	n.ownMu.Unlock()
	if fl == nil {
		return false
	}
	off := 0
	for _, p := range fl.batch {
		k := len(p.ops)
		if err == nil && res != nil {
			part := res[off : off+k]
			p.deliver(nil, func() { copyResults(p.res, part) })
		} else {
			p.deliver(err, nil)
		}
		off += k
	}
	return true
}

// copyResults copies src into dst deeply: src's limiter results live in
// buffers the FSM reuses for the next entry.
func copyResults(dst, src []shards.Result) {
	for i := range src {
		d, s := &dst[i], &src[i]
		d.Err, d.N = s.Err, s.N
		d.Results = append(d.Results[:0], s.Results...)
	}
}

// Close shuts the node down: pending commands fail with ErrShutdown, raft
// stops, every goroutine exits, and the stores are closed. The raft state
// stays on disk. Close is idempotent.
func (n *Node) Close() error {
	n.closed.Do(func() {
		n.cancel()
		if err := n.raft.Shutdown().Error(); err != nil {
			n.closeErr = fmt.Errorf("replication: shut down raft: %w", err)
		}
		close(n.raftStopped)
		n.fwd.close()
		n.wg.Wait()
		n.boot.shutdownStores()
	})
	return n.closeErr
}

// futureError waits for the raft future f and returns its error, or
// ErrShutdown once raft has shut down without answering it: raft never
// answers a future still queued in one of its buffered channels when it
// stops (the apply channel, BatchApplyCh in raftConfig, and the
// leadership-transfer channel), and waiting on one would keep Close
// waiting for this node's goroutines forever. The goroutine left waiting
// on such a future holds only the future.
func (n *Node) futureError(f raft.Future) error {
	ch := make(chan error, 1)
	go func() { ch <- f.Error() }()
	select {
	case err := <-ch:
		return err
	case <-n.raftStopped:
		// raft answered every future it will ever answer before Shutdown
		// returned; the goroutine above may still be passing one on.
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case err := <-ch:
			return err
		case <-t.C:
			return ErrShutdown
		}
	}
}

func (bt *bootstrap) shutdownStores() {
	n := bt.n
	if n.trans != nil {
		_ = n.trans.Close()
	} else if n.stream != nil {
		_ = n.stream.Close()
	}
	if n.logStore != nil {
		if err := n.logStore.close(); err != nil && n.closeErr == nil {
			n.closeErr = fmt.Errorf("replication: close raft store: %w", err)
		}
	}
}

// Members returns the Node's membership changes: join, remove, failover.
func (n *Node) Members() *Members { return &n.members }

// Slots returns the Node's changes of its group's slots and move lease.
func (n *Node) Slots() *Slots { return &n.clusterSlots }

// Directory returns the Node's view of the other groups of its cluster.
func (n *Node) Directory() *Directory { return &n.dir }

// Store returns the local keyspace. Only the FSM writes to it; readers use
// it after ReadNow.
func (n *Node) Store() *shards.Store { return n.store }

// Write replicates ops and fills res (len(res) == len(ops)) with their
// results, in order. It returns once the entry holding them is committed
// and applied (on the leader; a follower forwards and relays), so an
// acknowledged decision survives any failover. Per-operation failures
// (WRONGTYPE ...) are in res[i].Err; the returned error is about the whole
// write: ErrNoLeader (none within NoLeaderTimeout; nothing applied),
// ErrLeadershipLost (outcome unknown), ErrRemoved (at once, on a node
// removed from the cluster; nothing applied), ErrShutdown, or ctx's error.
func (n *Node) Write(ctx context.Context, ops []shards.Op, res []shards.Result) error {
	if empty, err := n.checkWrite(ops, res); empty || err != nil {
		return err
	}
	return n.submit(ctx, &pending{ops: ops, res: res})
}

// checkWrite is what Write and WriteGroup check before sending ops
// anywhere: len(res) == len(ops), this node not removed, and every op one
// the log accepts (an op the log would refuse must fail alone, not poison
// the entry it would share with other callers' ops). empty is true when
// there is nothing to write.
func (n *Node) checkWrite(ops []shards.Op, res []shards.Result) (empty bool, err error) {
	if len(ops) != len(res) {
		return false, fmt.Errorf("replication: write: %d results for %d operations", len(res), len(ops))
	}
	if len(ops) == 0 {
		return true, nil
	}
	if err := n.mship.removedErr(); err != nil {
		return false, err
	}
	for i := range ops {
		if err := checkOp(&ops[i]); err != nil {
			return false, fmt.Errorf("replication: write: %w", err)
		}
	}
	return false, nil
}

// WriteAtomic is Write: the ops of one call are always one log entry (the
// submit path never splits a caller's ops across entries, however many
// they are), and the FSM applies an entry whole, so no other write lands
// between them and a failover applies all of them or none.
func (n *Node) WriteAtomic(ctx context.Context, ops []shards.Op, res []shards.Result) error {
	return n.Write(ctx, ops, res)
}

// ApplyEncoded runs a batch forwarded by a follower (the payload of the
// forwarding service's apply request, encodeForward) through this leader's
// submit path and returns the encoded results. On a node that is not the leader it fails with ErrNotLeader
// without applying anything.
func (n *Node) ApplyEncoded(ctx context.Context, payload []byte) ([]byte, error) {
	ops, err := decodeForward(payload)
	if err != nil {
		return nil, err
	}
	if !n.ready.Load() && n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	res := make([]shards.Result, len(ops))
	if err := n.submit(ctx, &pending{ops: ops, res: res, leaderOnly: true}); err != nil {
		return nil, err
	}
	return encodeResults(make([]byte, 0, 32*len(res)), res), nil
}

// ReadNow confirms that this node may serve a read and returns the instant
// (Unix ns) to evaluate it at.
//
// By default reads are linearizable: the leader confirms its leadership
// with a quorum (one heartbeat round, shared by concurrent reads), waits
// until every entry it stamped before the read is applied, and answers
// max(clock, last stamped time), raising its stamp floor to that instant so
// no later entry is stamped earlier. A follower asks the leader for that
// read point (the forwarding service's read-index request), waits until it
// has applied up to it, and
// answers the leader's instant (or its own last applied time if later).
//
// With LocalReads every node answers at once with its last applied stamped
// time: no network round trip, possibly stale.
//
// Errors: ErrNoLeader within NoLeaderTimeout, ErrRemoved (at once, on a
// node removed from the cluster), ErrShutdown, ctx's error.
func (n *Node) ReadNow(ctx context.Context) (int64, error) {
	if err := n.mship.removedErr(); err != nil {
		return 0, err
	}
	if n.cfg.LocalReads {
		return max(n.fsm.LastTime(), 0), nil
	}
	deadline := time.Now().Add(n.cfg.NoLeaderTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		if err := n.ctx.Err(); err != nil {
			return 0, ErrShutdown
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		var err error
		if n.ready.Load() {
			var now int64
			now, _, err = n.reads.readIndex(ctx, deadline)
			if err == nil {
				return now, nil
			}
		} else if n.raft.State() != raft.Leader {
			var now int64
			now, err = n.reads.readViaLeader(ctx, deadline)
			if err == nil {
				return now, nil
			}
		}
		if err != nil && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) && !errors.Is(err, errNotSent) {
			return 0, err
		}
		if !n.waitLeaderChange(deadline) {
			return 0, fmt.Errorf("replication: read: %w", ErrNoLeader)
		}
	}
}

// reads is the Node's linearizable reads: the leader's read index and a
// follower's read through the leader (ReadNow is the entry point).
type reads struct{ n *Node }

// readIndex is the leader's side of a linearizable read: it returns the
// read instant and the FSM index a follower must reach before reading.
func (rd *reads) readIndex(ctx context.Context, deadline time.Time) (int64, uint64, error) {
	n := rd.n
	n.stampMu.Lock()
	now := max(n.clock(), n.lastStamp, n.fsm.LastTime())
	n.lastStamp = now
	target := n.seq
	n.stampMu.Unlock()
	if err := n.verify.verify(ctx, deadline); err != nil {
		return 0, 0, err
	}
	if !n.ready.Load() {
		return 0, 0, ErrNotLeader
	}
	// Every entry stamped before now must be applied here before a read
	// at now may reclaim what expired by then.
	if err := rd.waitCh(ctx, n.done.reach(target), deadline); err != nil {
		return 0, 0, err
	}
	return now, n.fsm.LastIndex(), nil
}

// ReadIndexEncoded answers the forwarding service's read-index request on
// the leader: the encoded read instant and FSM index (see ReadNow).
// ErrNotLeader on any other node.
func (rd *reads) ReadIndexEncoded(ctx context.Context) ([]byte, error) {
	n := rd.n
	if !n.ready.Load() {
		return nil, ErrNotLeader
	}
	now, idx, err := rd.readIndex(ctx, time.Now().Add(n.cfg.NoLeaderTimeout))
	if err != nil {
		return nil, err
	}
	return encodeReadIndex(idx, now), nil
}

// readViaLeader asks the leader for a read point and waits until this node
// has applied up to it. ErrNotLeader, ErrNoLeader and errNotSent mean
// nothing was asked of a leader: the caller retries.
func (rd *reads) readViaLeader(ctx context.Context, deadline time.Time) (int64, error) {
	n := rd.n
	addr, ok := n.forwardTarget()
	if !ok {
		return 0, ErrNoLeader
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	body, err := n.fwd.do(cctx, addr, reqReadIndex, nil, true)
	if err != nil {
		if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, errNotSent) {
			return 0, err
		}
		return 0, fmt.Errorf("replication: read index from %s: %w", addr, err)
	}
	idx, now, err := decodeReadIndex(body)
	if err != nil {
		return 0, err
	}
	if err := rd.waitCh(ctx, n.fsm.appliedCh(idx), deadline); err != nil {
		return 0, err
	}
	return max(now, n.fsm.LastTime()), nil
}

func (rd *reads) waitCh(ctx context.Context, ch <-chan struct{}, deadline time.Time) error {
	n := rd.n
	select {
	case <-ch:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return fmt.Errorf("replication: read: %w", ErrNoLeader)
	case <-ctx.Done():
		return ctx.Err()
	case <-n.ctx.Done():
		return ErrShutdown
	}
}

// verifier coalesces concurrent VerifyLeader calls: a caller joins the next
// round that has not started yet, so the round it waits for began after the
// caller arrived (which is what linearizability needs), and one heartbeat
// round serves every read that queued meanwhile.
type verifier struct {
	r       *raft.Raft
	mu      sync.Mutex
	running bool        // guarded by mu
	next    *verifyWave // guarded by mu
}

type verifyWave struct {
	done chan struct{}
	err  error
}

func (v *verifier) verify(ctx context.Context, deadline time.Time) error {
	v.mu.Lock()
	if v.next == nil {
		v.next = &verifyWave{done: make(chan struct{})}
	}
	w := v.next
	if !v.running {
		v.running = true
		go v.loop()
	}
	v.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.done:
		return w.err
	case <-t.C:
		return fmt.Errorf("replication: verify leadership: %w", ErrNoLeader)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop runs rounds while callers wait and exits when none do. VerifyLeader
// returns on step-down, but not for a round still queued when raft shuts
// down: then this goroutine stays blocked (callers give up at their
// deadline; nothing waits for it).
func (v *verifier) loop() {
	for {
		v.mu.Lock()
		w := v.next
		v.next = nil
		if w == nil {
			v.running = false
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		if err := v.r.VerifyLeader().Error(); err != nil {
			w.err = translate("verify leadership", err)
		}
		close(w.done)
	}
}

// leaderChanged returns a channel closed at the next leader change.
func (n *Node) leaderChanged() <-chan struct{} {
	n.leadMu.Lock()
	defer n.leadMu.Unlock()
	return n.leadChange
}

// leadership is the Node's view of its group's leader: it follows raft's
// leadership changes, readies a new leader, names the leader's addresses
// and runs a change on the leader (here, or forwarded to it).
type leadership struct{ n *Node }

func (ld *leadership) broadcastChange() {
	n := ld.n
	n.leadMu.Lock()
	close(n.leadChange)
	n.leadChange = make(chan struct{})
	n.leadMu.Unlock()
	n.kickDirectory() // CLUSTER replies name the new leader at once
}

// leaderRaft returns the leader's raft address, where its forwarding
// service listens, when a leader other than this node is known.
func (ld *leadership) leaderRaft() (string, bool) {
	n := ld.n
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) == n.cfg.NodeID {
		return "", false
	}
	return string(addr), true
}

// leaderResp returns the leader's RESP address (for ROLE and INFO), if a
// leader is known and its address has been replicated.
func (ld *leadership) leaderResp() (string, bool) {
	n := ld.n
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", false
	}
	if string(id) == n.cfg.NodeID {
		return n.cfg.RespAddr, true
	}
	return n.fsm.member(string(id))
}

// watchLeadership follows leader changes: it counts them, wakes waiters,
// and when this node becomes leader runs a barrier so that every entry of
// earlier terms is applied (and the last stamped time known) before it
// stamps or serves anything.
func (ld *leadership) watchLeadership() {
	n := ld.n
	defer n.wg.Done()
	obsCh := make(chan raft.Observation, 64)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-n.ctx.Done():
			n.ready.Store(false)
			return
		case <-obsCh:
			n.leaderChanges.Add(1)
			ld.broadcastChange()
		case isLeader := <-n.raft.LeaderCh():
			n.ready.Store(false)
			gen := n.leadGen.Add(1)
			if isLeader {
				n.wg.Add(1)
				go ld.becomeReady(gen)
			}
			ld.broadcastChange()
		}
	}
}

func (ld *leadership) becomeReady(gen uint64) {
	n := ld.n
	defer n.wg.Done()
	for n.leadGen.Load() == gen && n.ctx.Err() == nil {
		err := n.futureError(n.raft.Barrier(n.cfg.NoLeaderTimeout))
		if n.leadGen.Load() != gen {
			return
		}
		if err == nil {
			n.ready.Store(true)
			ld.broadcastChange()
			attrs := []any{"term", n.raft.CurrentTerm()}
			if t := n.fsm.LastTime(); t != math.MinInt64 { // nothing stamped yet: no time to show
				attrs = append(attrs, "time", time.Unix(0, t).UTC().Format(time.RFC3339Nano))
			}
			n.log.Info("replication: leader ready", attrs...)
			n.gid.recordGroupID(gen)
			if addr, ok := n.fsm.member(n.cfg.NodeID); !ok || addr != n.cfg.RespAddr {
				ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NoLeaderTimeout)
				if err := n.submit(ctx, &pending{member: &memberChange{id: n.cfg.NodeID, respAddr: n.cfg.RespAddr}}); err != nil {
					n.log.Warn("replication: record own address", "err", err)
				}
				cancel()
			}
			return
		}
		if errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, ErrShutdown) || n.raft.State() != raft.Leader {
			return
		}
	}
}

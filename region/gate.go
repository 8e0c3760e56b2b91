package region

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/respclient"
	"github.com/cellserver/cellserver/shards"
)

// Unreachable is what a global key answers when its home region does not.
type Unreachable uint8

// The region-unreachable choices.
const (
	// UnreachableAnswerError answers an error naming the region (the
	// default).
	UnreachableAnswerError Unreachable = iota
	// UnreachableLocal decides the key in this region, alone, with its
	// whole limit.
	UnreachableLocal
	// UnreachableDeny refuses the request (limited), consuming nothing.
	UnreachableDeny
)

// ParseUnreachable reads a region-unreachable value: error, local or deny.
func ParseUnreachable(s string) (Unreachable, bool) {
	switch s {
	case "error":
		return UnreachableAnswerError, true
	case "local":
		return UnreachableLocal, true
	case "deny":
		return UnreachableDeny, true
	}
	return 0, false
}

// PeerConfig is one region-peer.
type PeerConfig struct {
	// Name is the peer region's name.
	Name string
	// Addrs are RESP addresses (host:port) of any of its nodes.
	Addrs []string
	// Password is the peer region's requirepass ("" when it has none).
	Password string
}

// Config configures a Gate.
type Config struct {
	// Name is this region's name (non-empty).
	Name string
	// Peers are the other regions, names distinct and none equal to Name.
	Peers []PeerConfig
	// Weights give each region's share of a split key (region-weight),
	// 1..MaxWeight; a region not named weighs 1.
	Weights map[string]int64
	// Unreachable is what a global key answers when its home does not.
	Unreachable Unreachable
	// Timeout bounds one forwarded call to a home region (its dial, its
	// send and its reply), > 0.
	Timeout time.Duration
	// TLS, when not nil, is the client configuration of every link to a
	// peer region (their addresses are then TLS ports).
	TLS *tls.Config
	// MaxLogLimit is the largest sliding-log limit a peer may send
	// (sl-max-limit).
	MaxLogLimit int64
	// SyncInterval is how often async consumption is shipped to each
	// peer; 0 ships only when Sync is called (tests).
	SyncInterval time.Duration
	// BacklogBytes bounds the async consumption queued for one peer
	// (keys plus 64 bytes each); beyond it new consumption is dropped and
	// counted. 0 takes DefaultBacklogBytes.
	BacklogBytes int64
	// Policy is the initial policy (nil: every key local).
	Policy *Policy
	// Logger receives peer state changes and refused peers.
	Logger *slog.Logger
	// Now is the clock (Unix ns), safe for concurrent use.
	Now func() int64
}

// DefaultBacklogBytes is Config.BacklogBytes's default: 16 MiB per peer.
const DefaultBacklogBytes = 16 << 20

// Validate checks c.
func (c *Config) Validate() error {
	if c.Name == "" {
		return errors.New("region: no region name")
	}
	seen := map[string]bool{c.Name: true}
	for _, p := range c.Peers {
		if seen[p.Name] {
			return fmt.Errorf("region-peer %s: named twice (or is this region)", p.Name)
		}
		seen[p.Name] = true
		if len(p.Addrs) == 0 {
			return fmt.Errorf("region-peer %s: no address", p.Name)
		}
	}
	for n, w := range c.Weights {
		if !seen[n] {
			return fmt.Errorf("region-weight %s: no such region", n)
		}
		if w < 1 || w > MaxWeight {
			return fmt.Errorf("region-weight %s: %d is outside 1..%d", n, w, MaxWeight)
		}
	}
	if c.Timeout <= 0 {
		return errors.New("region: timeout must be positive")
	}
	if c.Policy != nil {
		return c.checkPolicy(c.Policy)
	}
	return nil
}

// checkPolicy checks that every global rule's home is a known region.
func (c *Config) checkPolicy(p *Policy) error {
	for _, r := range p.rules {
		if r.Mode != ModeGlobal || r.Home == c.Name {
			continue
		}
		found := false
		for _, q := range c.Peers {
			found = found || q.Name == r.Home
		}
		if !found {
			return fmt.Errorf("region-policy %s: home region %q is neither this region nor a region-peer", r.Pattern, r.Home)
		}
	}
	return nil
}

// Gate is the decision path's region stage (package decide): it applies
// the region policy in front of a decide.Backend: local keys pass
// through, split keys are scaled to this region's share, async keys are
// decided here and their consumption shipped to every peer, global keys of
// another home are forwarded there; and it applies what peers forward and
// ship here (Exec, Apply). It is safe for concurrent use; the policy
// changes live (SetPolicy).
type Gate struct {
	cfg    Config
	inner  decide.Backend
	policy atomic.Pointer[Policy]
	links  map[string]*link
	share  int64 // this region's weight
	total  int64 // every region's weight

	ctx      context.Context // the links' connections live until it ends
	cancel   context.CancelFunc
	stopSync context.CancelFunc // ends the background sender

	streamMu sync.Mutex
	stream   string             // this process's async stream id, guarded by streamMu
	era      int64              // the StreamEra stream was started in (-1: none yet)
	outboxes map[string]*outbox // async consumption queued per peer
	inboxes  sync.Map           // origin name → *inboxStats
	syncDone chan struct{}      // closed when the background sender stops

	forwarded atomic.Int64 // decisions sent to a home region and answered
	fallbacks atomic.Int64 // decisions answered per region-unreachable
	served    sync.Map     // origin name → *atomic.Int64: decisions made here for that peer
	refused   atomic.Int64 // peer calls refused (wrong region, unknown origin, malformed)
}

// A Gate is itself the Backend the doors call, and the region stage
// decide.Groups writes through.
var (
	_ decide.Backend = (*Gate)(nil)
	_ decide.Gate    = (*Gate)(nil)
)

// New returns a Gate over inner. Close releases its peer connections.
func New(cfg Config, inner decide.Backend) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.BacklogBytes <= 0 {
		cfg.BacklogBytes = DefaultBacklogBytes
	}
	g := &Gate{cfg: cfg, inner: inner, links: make(map[string]*link),
		era: -1, outboxes: make(map[string]*outbox), syncDone: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	weight := func(n string) int64 {
		if w, ok := cfg.Weights[n]; ok {
			return w
		}
		return 1
	}
	g.share = weight(cfg.Name)
	g.total = g.share
	for _, p := range cfg.Peers {
		g.links[p.Name] = newLink(g.ctx, p, cfg.Timeout, cfg.TLS, cfg.Logger, cfg.Now)
		g.total += weight(p.Name)
		g.served.Store(p.Name, new(atomic.Int64))
		g.outboxes[p.Name] = newOutbox(cfg.BacklogBytes)
	}
	var syncCtx context.Context
	syncCtx, g.stopSync = context.WithCancel(context.Background())
	if cfg.SyncInterval > 0 && len(cfg.Peers) > 0 {
		go func() {
			defer close(g.syncDone)
			g.runSync(syncCtx, cfg.SyncInterval)
		}()
	} else {
		close(g.syncDone)
	}
	p := cfg.Policy
	if p == nil {
		p = &Policy{}
	}
	g.policy.Store(p)
	return g, nil
}

// Close stops the background sender, after one last round to every peer
// (each bounded by Config.Timeout), and closes the links to the peers.
// Async consumption that round could not deliver is lost.
func (g *Gate) Close() {
	g.stopSync()
	<-g.syncDone
	g.cancel()
	for _, l := range g.links {
		l.close()
	}
}

// SetTLS replaces the client TLS configuration of the links to peer
// regions (certificate rotation): connections dialled from now on use it,
// those open keep their session. It fails, changing nothing, on a gate
// whose links started without TLS (turning TLS on needs a restart).
func (g *Gate) SetTLS(c *tls.Config) error {
	if g.cfg.TLS == nil || c == nil {
		return errors.New("region: the links to peer regions do not use TLS; turning it on needs a restart")
	}
	for _, l := range g.links {
		l.tls.Store(c)
	}
	return nil
}

// StreamID is the id of this process's stream of async batches now.
func (g *Gate) StreamID() string { return g.streamAt(g.cfg.Now()) }

// streamAt returns the stream batches cut at now (Unix ns) belong to: one
// per StreamEra. A sequence record counts in a fixed window (RecordPeriod)
// and starts again at 0 in the next: a stream that went on for ever would
// find its batches admitted twice over once its record's window turned. So
// each era starts a new stream (a new id naming the era, sequences from
// 1), whose records live a few eras, and a batch of the old stream sent
// again after the turn still finds its record.
func (g *Gate) streamAt(now int64) string {
	era := now / int64(StreamEra)
	g.streamMu.Lock()
	defer g.streamMu.Unlock()
	if era != g.era {
		g.era, g.stream = era, newStreamID(era)
	}
	return g.stream
}

// Name is this region's name.
func (g *Gate) Name() string { return g.cfg.Name }

// Policy returns the policy in force.
func (g *Gate) Policy() *Policy { return g.policy.Load() }

// SetPolicy puts p in force for the decisions that start from now on, after
// checking that every global home is a known region.
func (g *Gate) SetPolicy(p *Policy) error {
	if err := g.cfg.checkPolicy(p); err != nil {
		return err
	}
	g.policy.Store(p)
	return nil
}

// ReadNow is the inner Backend's.
func (g *Gate) ReadNow(ctx context.Context) (int64, error) { return g.inner.ReadNow(ctx) }

// Store is the inner Backend's.
func (g *Gate) Store() *shards.Store { return g.inner.Store() }

// route is what one op of a Write becomes.
type route struct {
	local   bool  // applied by the inner Backend (possibly scaled)
	async   bool  // and its consumption shipped to every peer
	home    *link // forwarded there (global, another home)
	refused bool  // answered by res already (a share of nothing, mixed modes)
}

// Write applies ops: local and split ones (scaled) through the inner
// Backend in one call, in their order; global ones of another home are
// forwarded to it first, each answering on its own (res[i].Err, an
// *UnreachableError or a *RemoteError, or a refusal per region-unreachable).
// Ops other than limiter requests pass through unchanged.
func (g *Gate) Write(ctx context.Context, ops []shards.Op, res []shards.Result) error {
	return g.write(ctx, ops, res, false)
}

// WriteAtomic is Write for a transaction: the local ops are applied by the
// inner WriteAtomic; a global key of another home fails with
// ErrGlobalInTransaction.
func (g *Gate) WriteAtomic(ctx context.Context, ops []shards.Op, res []shards.Result) error {
	return g.write(ctx, ops, res, true)
}

// WriteThrough is Write with w in place of the inner Backend's Write: the
// policy applies alike (split scaled, async shipped, global forwarded),
// and what this region decides goes through w. It serves front doors that
// route ops themselves (the rate-limit service across the groups of a
// cluster).
func (g *Gate) WriteThrough(ctx context.Context, ops []shards.Op, res []shards.Result, w decide.WriteFunc) error {
	return g.writeWith(ctx, ops, res, false, w)
}

func (g *Gate) write(ctx context.Context, ops []shards.Op, res []shards.Result, atomicTx bool) error {
	return g.writeWith(ctx, ops, res, atomicTx, nil)
}

func (g *Gate) writeWith(ctx context.Context, ops []shards.Op, res []shards.Result, atomicTx bool, w decide.WriteFunc) error {
	innerWrite := func(ops []shards.Op, res []shards.Result) error {
		switch {
		case w != nil:
			return w(ctx, ops, res)
		case atomicTx:
			return g.inner.WriteAtomic(ctx, ops, res)
		}
		return g.inner.Write(ctx, ops, res)
	}
	pol := g.policy.Load()
	if pol.Len() == 0 && !writesRecords(ops) {
		return innerWrite(ops, res)
	}
	var (
		local    []shards.Op
		localIdx []int
		asyncIdx []int           // indexes into local of the async ops
		fwd      map[*link][]int // indexes into ops forwarded, per home
		changed  bool
	)
	for i := range ops {
		op := &ops[i]
		rt, scaled := g.plan(pol, op, &res[i])
		switch {
		case rt.refused:
			changed = true
			continue
		case rt.home != nil && atomicTx:
			res[i] = shards.Result{Err: ErrGlobalInTransaction}
			changed = true
			continue
		case rt.home != nil:
			changed = true
			if fwd == nil {
				fwd = map[*link][]int{}
			}
			fwd[rt.home] = append(fwd[rt.home], i)
			continue
		case scaled != nil:
			changed = true
			local = append(local, *scaled)
		case rt.async:
			changed = true
			asyncIdx = append(asyncIdx, len(local))
			local = append(local, *op)
		default:
			local = append(local, *op)
		}
		localIdx = append(localIdx, i)
	}
	if !changed {
		return innerWrite(ops, res)
	}
	// region-unreachable local: what the home did not answer is decided
	// here, with the whole limit (its keys are global, so no local op of
	// this call shares them: the order between them does not matter).
	for _, i := range g.forwardAll(fwd, ops, res) {
		local = append(local, ops[i])
		localIdx = append(localIdx, i)
	}
	if len(local) == 0 {
		return nil
	}
	lres := make([]shards.Result, len(local))
	if err := innerWrite(local, lres); err != nil {
		return err
	}
	for j, i := range localIdx {
		res[i] = lres[j]
	}
	for _, j := range asyncIdx {
		g.enqueue(&local[j], &lres[j])
	}
	return nil
}

// writesRecord reports whether op is a limiter op that would change a
// sequence record (a key under seqKeyPrefix, with a quantity other than
// 0): only a peer's batch (Apply, which writes through the inner Backend)
// may, or a client could move a lane's count ahead and have its real
// batches taken for duplicates. Peeks, DEL (a lane whose record is gone
// is resequenced, nothing lost) and RESTORE (how MIGRATE moves a record
// with its slot) pass.
func writesRecord(op *shards.Op) bool {
	if op.Code != shards.OpLimit && op.Code != shards.OpLimitAll {
		return false
	}
	for i, k := range op.Keys {
		if i < len(op.Reqs) && op.Reqs[i].Quantity != 0 && len(k) >= len(seqKeyPrefix) && string(k[:len(seqKeyPrefix)]) == seqKeyPrefix {
			return true
		}
	}
	return false
}

// writesRecords reports whether any of ops is writesRecord's.
func writesRecords(ops []shards.Op) bool {
	for i := range ops {
		if writesRecord(&ops[i]) {
			return true
		}
	}
	return false
}

// plan decides what op becomes under pol. A split op comes back scaled (a
// copy; op is left as it was). A refused op has its reply in *res.
func (g *Gate) plan(pol *Policy, op *shards.Op, res *shards.Result) (route, *shards.Op) {
	if op.Code != shards.OpLimit && op.Code != shards.OpLimitAll || len(op.Keys) == 0 {
		return route{local: true}, nil
	}
	if writesRecord(op) {
		*res = shards.Result{Err: ErrSequenceRecord}
		return route{refused: true}, nil
	}
	rule := pol.Match(op.Keys[0])
	for _, k := range op.Keys[1:] {
		if r := pol.Match(k); r.Mode != rule.Mode || r.Home != rule.Home {
			*res = shards.Result{Err: ErrMixedModes}
			return route{refused: true}, nil
		}
	}
	if rule.Mode == ModeAsync && holdsLeases(op) {
		*res = shards.Result{Err: ErrLeaseMode}
		return route{refused: true}, nil
	}
	switch {
	case rule.Mode == ModeGlobal && rule.Home != g.cfg.Name:
		return route{home: g.links[rule.Home]}, nil
	case rule.Mode == ModeAsync:
		return route{local: true, async: true}, nil
	case rule.Mode != ModeSplit:
		return route{local: true}, nil
	}
	scaled := *op
	scaled.Reqs = make([]engine.Request, len(op.Reqs))
	for i := range op.Reqs {
		r, ok := Scale(op.Reqs[i], g.share, g.total)
		if !ok {
			// This region's share of the key is nothing: refused here,
			// every key of the call (CL.THROTTLEALL consumes all or none).
			out := make([]engine.Result, len(op.Reqs))
			for j := range op.Reqs {
				s, _ := Scale(op.Reqs[j], g.share, g.total)
				out[j] = refusal(&op.Reqs[j], max(limitOf(&s), 0), -1)
			}
			*res = shards.Result{Results: out}
			return route{refused: true}, nil
		}
		scaled.Reqs[i] = r
	}
	return route{local: true}, &scaled
}

// holdsLeases reports whether op is an in-flight (concurrency) request.
func holdsLeases(op *shards.Op) bool {
	for i := range op.Reqs {
		if op.Reqs[i].Kind == engine.KindConcurrency {
			return true
		}
	}
	return false
}

// forwardAll sends the ops of fwd (indexes into ops, per home) to their
// homes — the ops of one home pipelined on one connection, in order, the
// homes at once — and fills res from the answers. It returns the indexes
// of the ops a home did not answer while region-unreachable is local: the
// caller decides them here.
func (g *Gate) forwardAll(fwd map[*link][]int, ops []shards.Op, res []shards.Result) []int {
	if len(fwd) == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		local []int
		wg    sync.WaitGroup
	)
	one := func(l *link, idx []int) {
		calls := make([][][]byte, len(idx))
		for j, i := range idx {
			calls[j] = encodeExec(g.cfg.Name, l.name, &ops[i])
		}
		var replies []respclient.Value
		var err error
		if len(calls) == 1 {
			var v respclient.Value
			if v, err = l.call(calls[0]...); err == nil {
				replies = []respclient.Value{v}
			}
		} else {
			replies, err = l.callMany(calls)
		}
		for j, i := range idx {
			var e error = err
			var v respclient.Value
			if err == nil {
				v = replies[j]
			}
			if !g.answer(l, &ops[i], v, e, &res[i]) {
				mu.Lock()
				local = append(local, i)
				mu.Unlock()
			}
		}
	}
	for l, idx := range fwd {
		if len(fwd) == 1 {
			one(l, idx)
			break
		}
		wg.Go(func() { one(l, idx) })
	}
	wg.Wait()
	slices.Sort(local)
	return local
}

// answer fills res for op from its home's reply v, or from err when the
// home did not answer. It returns false when the home did not answer and
// region-unreachable is local: the caller decides op here.
func (g *Gate) answer(l *link, op *shards.Op, v respclient.Value, err error, res *shards.Result) bool {
	if err == nil && v.Kind == respclient.Error && transientReply(v.Str) {
		// A redirection not followed, or a region between leaders: its
		// text names the peer's nodes and means nothing to this region's
		// client; the home did not decide.
		err = &UnreachableError{Region: l.name, Err: errors.New(v.Str)}
	}
	if err == nil {
		if v.Kind == respclient.Error {
			*res = shards.Result{Err: &RemoteError{Region: l.name, Msg: v.Str}}
			return true
		}
		out := make([]engine.Result, len(op.Keys))
		if err := decodeResults(v, len(op.Keys), out); err != nil {
			*res = shards.Result{Err: &UnreachableError{Region: l.name, Err: err}}
			return true
		}
		g.forwarded.Add(1)
		l.forwarded.Add(1)
		g.pollGrants(out)
		*res = shards.Result{Results: out}
		return true
	}
	g.fallbacks.Add(1)
	switch g.cfg.Unreachable {
	case UnreachableLocal:
		return false
	case UnreachableDeny:
		out := make([]engine.Result, len(op.Keys))
		for i := range op.Reqs {
			out[i] = refusal(&op.Reqs[i], limitOf(&op.Reqs[i]), int64(downBackoff))
		}
		*res = shards.Result{Results: out}
	default:
		*res = shards.Result{Err: err}
	}
	return true
}

// DefaultGrantPoll is how often a CC.ACQUIRE … WAIT forwarded to its
// home asks again while it waits in the home's line, when SyncInterval is
// 0.
const DefaultGrantPoll = 100 * time.Millisecond

// pollGrants makes the waiting client of each queued result (a CC.ACQUIRE
// … WAIT in the home's line) ask again within SyncInterval. A grant is
// applied by the home's store, whose grant hook wakes only the home's own
// connections: the connection here learns of it by asking again with the
// same id (it keeps its place while waiting; granted, the same id is
// answered allowed with its lease). retry_after, when to ask again, is
// otherwise the earliest held lease's expiry, or never.
func (g *Gate) pollGrants(out []engine.Result) {
	every := int64(g.cfg.SyncInterval)
	if every <= 0 {
		every = int64(DefaultGrantPoll)
	}
	for i := range out {
		if r := &out[i]; r.Queued && (r.RetryAfter < 0 || r.RetryAfter > every) {
			r.RetryAfter = every
		}
	}
}

// Exec runs a peer's REGION.EXEC here, exactly as asked (the peer has
// already decided that this region is the key's home; a key this region's
// policy does not make global here is served, and counted as a policy
// mismatch). It refuses a call whose target is not this region or whose
// origin is not a configured peer, logging why; nothing is applied then.
// The caller sets call.Op.NoGrow as for its own clients' ops (maxmemory).
// err is about the whole call; a failure of the op is in res.Err.
func (g *Gate) Exec(ctx context.Context, call *ExecCall, res *shards.Result) error {
	switch {
	case call.Target != g.cfg.Name:
		g.refuse(call, "it names another target region")
		return fmt.Errorf("%w: this is region %s, not %s", ErrWrongRegion, g.cfg.Name, call.Target)
	case g.links[call.Origin] == nil:
		g.refuse(call, "its origin is not a region-peer")
		return fmt.Errorf("%w: %s is not a region-peer of %s", ErrUnknownPeer, call.Origin, g.cfg.Name)
	}
	ops := []shards.Op{call.Op}
	rs := []shards.Result{{}}
	if err := g.inner.Write(ctx, ops, rs); err != nil {
		return err
	}
	*res = rs[0]
	if n, ok := g.served.Load(call.Origin); ok {
		n.(*atomic.Int64).Add(1)
	}
	pol := g.policy.Load()
	for _, k := range call.Op.Keys {
		if r := pol.Match(k); r.Mode != ModeGlobal || r.Home != g.cfg.Name {
			g.disagree(g.inbox(call.Origin), call.Origin, k, r, ModeGlobal)
			break // one decision, counted once
		}
	}
	return nil
}

// Refused counts a malformed peer call (RefusedBatch) and logs it.
func (g *Gate) RefusedBatch(err error) {
	g.refused.Add(1)
	g.cfg.Logger.Warn("refused a region peer's call", "err", err)
}

func (g *Gate) refuse(call *ExecCall, why string) {
	g.refused.Add(1)
	g.cfg.Logger.Warn("refused a region peer's call: "+why, "region", g.cfg.Name, "origin", call.Origin, "target", call.Target)
}

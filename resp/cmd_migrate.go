package resp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
	errMigrateConnect = &textError{"IOERR error or timeout connecting to the client"}
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

// movedKey is one key MIGRATE sends: its payload, and what became of it.
type movedKey struct {
	key     []byte
	payload []byte
	replace bool // RESTORE ... REPLACE
	again   bool // in flight before this MIGRATE took it: never put back
	// home: the target is a member of the group this key's slot moves to
	// from this group, which can hold the key only if a RESTORE from here
	// landed: its BUSYKEY means the move is done, and a key of unknown
	// outcome may be sent there again.
	home bool
	// restored: the target answered OK. unknown: its RESTORE was (maybe
	// partly) sent and no reply came, so the target may or may not have it.
	restored, unknown bool
	// err is why a key not restored was not: the target's refusal, or the
	// failure that left its outcome unknown.
	err error
	// retry: the target answered that it could not tell (leadership
	// changed, no leader), or could not be reached (nothing was sent).
	// Unlike a reply that never came, neither leaves a RESTORE that may
	// still land later, so the key may be sent again at once.
	retry bool
}

// restoreOn dials the target at addr (internal/respclient: every reply
// bounded in size and due within the call's timeout), authenticates,
// selects the database and restores every key (ASKING before each RESTORE
// in a cluster, so that a group importing the slot takes it; an error
// answering ASKING is ignored, as a standalone server gives one and still
// restores), marking those it took, those it refused and those whose
// outcome is unknown (an I/O failure or a reply that is not RESP once the
// RESTOREs were sent), each with its failure. It returns the first
// failure.
func (c *Conn) restoreOn(addr string, m *migrateArgs, timeout time.Duration, keys []movedKey) error {
	err := c.exchange(addr, m, timeout, keys)
	if err != nil {
		for i := range keys {
			if !keys[i].restored && keys[i].err == nil {
				keys[i].err = err
				keys[i].retry = err == errMigrateConnect
			}
		}
	}
	return err
}

// exchange is restoreOn's exchange with the target: it marks the keys
// restored, unknown or refused (with their own refusal) and returns the
// first failure.
func (c *Conn) exchange(addr string, m *migrateArgs, timeout time.Duration, keys []movedKey) error {
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
		args := [][]byte{[]byte("RESTORE"), k.key, []byte("0"), k.payload}
		if k.replace {
			args = append(args, []byte("REPLACE"))
		}
		cl.Send(args...)
	}
	for i := range keys {
		keys[i].unknown = true
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
			keys[i].unknown = false
			keys[i].restored = true
		case respclient.Error:
			refusal := v.Err()
			if errors.Is(refusal, respclient.ErrBusyKey) && (keys[i].again || keys[i].home) {
				// Sent again, or to a group importing the slot from
				// this one: the target has the key, so a RESTORE of it
				// from here landed (an earlier MIGRATE's, an earlier
				// attempt of this one, or another node's at the same
				// time; while a key is in flight here nobody is sent
				// there to create it). Done; never REPLACE it: clients
				// may have used it there since.
				keys[i].unknown, keys[i].restored = false, true
				continue
			}
			// A refusal leaves the key here, except one that may have
			// been applied (TRYAGAIN Leadership changed …) or whose
			// outcome a group without a leader cannot tell: those keys
			// stay in flight, like a lost reply.
			keys[i].unknown = errors.Is(refusal, respclient.ErrTryAgain) || errors.Is(refusal, respclient.ErrClusterDown)
			keys[i].retry = keys[i].unknown
			keys[i].err = targetError(v.Str)
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

// resend sends the keys that went to a member of the group their slot
// moves to (home) and may be sent again at once (retry: the member answered
// that leadership changed or that the group has no leader, or could not
// be reached) again, without REPLACE, for up to one more timeout: to the
// same member after an answer (no longer the leader, it forwards the
// RESTORE, with its ASKING, to the one that is), to the group's next
// member after a failure to connect. So a leader change in the target
// group during MIGRATE costs a retry, not an abandoned move. A resent key
// that had landed answers BUSYKEY (done), one that had not is restored
// now. A key whose reply did not come in time is not sent again here (its
// RESTORE may still be waiting at a stopped member, and every copy sent
// is one more that may land later): it stays in flight, and the next
// MIGRATE naming it completes the move.
func (c *Conn) resend(m *migrateArgs, keys []movedKey, last error) {
	var addrs []string
	deadline := time.Now().Add(m.timeout)
	pause := 50 * time.Millisecond
	at := 0
	if last == errMigrateConnect {
		at = 1 // the first attempt could not reach m.addr
	}
	var idx []int
	for {
		idx = idx[:0]
		for i := range keys {
			if keys[i].home && keys[i].retry && !keys[i].restored {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return
		}
		if addrs == nil {
			if addrs = c.groupAddrs(m.addr); len(addrs) == 0 {
				return
			}
			at %= len(addrs)
		}
		left := time.Until(deadline)
		if left <= 0 || !c.pauseFor(min(pause, left)) {
			return
		}
		pause = min(2*pause, time.Second)
		if left = time.Until(deadline); left <= 0 {
			return
		}
		again := make([]movedKey, len(idx))
		for j, i := range idx {
			again[j] = keys[i]
			again[j].replace, again[j].err, again[j].retry = false, nil, false
		}
		err := c.restoreOn(addrs[at], m, min(m.timeout, left), again)
		for j, i := range idx {
			// A key whose earlier RESTORE may have landed is never put
			// back, whatever this attempt says (the slot may have been
			// closed meanwhile).
			again[j].unknown = again[j].unknown || (keys[i].unknown && !again[j].restored)
			keys[i] = again[j]
		}
		if err == errMigrateConnect {
			at = (at + 1) % len(addrs)
		}
	}
}

// pauseFor waits d; false when the server is shutting down.
func (c *Conn) pauseFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.srv.ctx.Done():
		return false
	}
}

// groupAddrs returns addr and then the RESP addresses of the other members
// of the known group addr belongs to (its leader first, as the routing
// table orders them); nil when addr is in no known group other than this
// node's. A member advertising an unspecified host is reached on addr's
// host.
func (c *Conn) groupAddrs(addr string) []string {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return nil
	}
	r := cl.Routing()
	if r == nil {
		return nil
	}
	g := r.GroupOfAddr(addr)
	if g < 0 || g == r.Self {
		return nil
	}
	host, _, _ := net.SplitHostPort(addr)
	addrs := []string{addr}
	for _, mb := range r.Groups[g].Members {
		h, p, err := net.SplitHostPort(mb.RespAddr)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			h = host
		}
		if a := net.JoinHostPort(h, p); a != addr {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// movesHome reports whether addr is a member of a known group that key's
// slot moves to from this node's group: that group imports it from here
// (as the routing table last showed it), or this group migrates it there
// (its own state). Such a group can hold a key of that slot only if it was
// restored from here.
func (c *Conn) movesHome(addr string, key []byte) bool {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return false
	}
	r := cl.Routing()
	if r == nil {
		return false
	}
	g := r.GroupOfAddr(addr)
	if g < 0 || g == r.Self {
		return false
	}
	s := keySlot(key)
	return r.Groups[g].Importing[s] == r.Groups[r.Self].Name || r.MigratingTo(s) == g
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

// inFlightError adds to err that n keys stayed in flight.
func inFlightError(err error, n int) error {
	return &textError{fmt.Sprintf("%s; %d key(s) are in flight: they answer TRYAGAIN until a MIGRATE naming them again completes the move, or CLUSTER ABORTMOVE puts them back", err.Error(), n)}
}

// migrate runs MIGRATE: COPY sends the keys' states; otherwise the keys
// move (see the top of this file). It answers OK, NOKEY or the failure.
func (c *Conn) migrate(m *migrateArgs) error {
	if len(m.keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if m.copy {
		return c.migrateCopy(m)
	}
	// One MIGRATE at a time per group (the move lease, through the
	// group's log), and the keys already in flight read after a read
	// barrier: a key an earlier MIGRATE left in flight is never put back
	// by this one (its RESTORE may have landed). takeKeys' Exclusive take
	// still decides which MIGRATE owns a key should a lease lapse.
	return c.runMove(m.timeout, func() error { return c.migrateHeld(m) })
}

// migrateHeld is migrate's move, run holding the group's move lease.
func (c *Conn) migrateHeld(m *migrateArgs) error {
	store := c.srv.backend.Store()
	again := make([]bool, len(m.keys)) // moving from an earlier failed MIGRATE
	if err := c.takeKeys(m, store, again); err != nil {
		return err
	}
	if _, err := c.readNow(); err != nil {
		return err
	}
	var keys []movedKey
	for i, k := range m.keys {
		if st, ok := store.Moving(k); ok {
			// A key moving to its slot's importing group, or sent again,
			// goes without REPLACE: the target holds it only if a RESTORE
			// from here landed, and its copy is then the one clients used
			// since.
			home := c.movesHome(m.addr, k)
			keys = append(keys, movedKey{key: k, payload: snapshot.EncodeDump(&st), replace: m.replace && !home && !again[i], again: again[i], home: home})
		}
	}
	if len(keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if err := c.restoreOn(m.addr, m, m.timeout, keys); err != nil && c.srv.cfg.Cluster != nil {
		c.resend(m, keys, err)
	}
	var done, back [][]byte
	var failed error // of the first key not restored
	inFlight := 0
	for _, k := range keys {
		if !k.restored && failed == nil {
			failed = k.err
		}
		switch {
		case k.restored:
			done = append(done, k.key)
		case !k.unknown && !k.again:
			back = append(back, k.key)
		default:
			inFlight++
		}
		// A key of unknown outcome stays in flight: putting it back
		// could leave it admitting in both places. So does one an
		// earlier MIGRATE left in flight (its RESTORE may have landed
		// there). The next MIGRATE naming it sends it again (a BUSYKEY
		// answer then means it had landed).
	}
	ops := make([]shards.Op, 0, 2)
	if len(done) > 0 {
		ops = append(ops, shards.Op{Code: shards.OpMoveDone, Keys: done})
	}
	if len(back) > 0 {
		ops = append(ops, shards.Op{Code: shards.OpMoveAbort, Keys: back})
	}
	if err := c.writeOps(ops); err != nil {
		return err
	}
	if failed != nil && inFlight > 0 {
		return inFlightError(failed, inFlight)
	}
	if failed != nil {
		return failed
	}
	c.WriteOK()
	return nil
}

// checkResend refuses to send key, in flight to another address, to addr
// when its recorded destination is a member of a known group other than
// addr's: the first RESTORE may have landed there, and the key must not
// land in two groups. Another member of the same group (its leader
// changed), or any address when the first went outside the cluster, is
// fine.
func (c *Conn) checkResend(key []byte, addr string) error {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return nil
	}
	dest := cl.MoveDest(key)
	r := cl.Routing()
	if dest == "" || dest == addr || r == nil {
		return nil
	}
	if g := r.GroupOfAddr(dest); g >= 0 && g != r.GroupOfAddr(addr) {
		return &textError{fmt.Sprintf("ERR key %s is in flight to %s, a member of group %s: MIGRATE it to a member of that group, or CLUSTER ABORTMOVE its slot",
			clip(key), dest, r.Groups[g].Name)}
	}
	return nil
}

// migrateCopy runs MIGRATE ... COPY: the target gets a copy of each live
// key's state, the source keeps its own.
func (c *Conn) migrateCopy(m *migrateArgs) error {
	var keys []movedKey
	for _, k := range m.keys {
		st, ok, err := c.lookup(k)
		if err != nil {
			return err
		}
		if ok {
			keys = append(keys, movedKey{key: k, payload: snapshot.EncodeDump(&st), replace: m.replace})
		}
	}
	if len(keys) == 0 {
		c.WriteSimple("NOKEY")
		return nil
	}
	if err := c.restoreOn(m.addr, m, m.timeout, keys); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

// takeKeys takes m's keys out of the keyspace into the moving set and
// sets again[i] for each key that an earlier MIGRATE had taken (sent
// again, never put back by this one). The keys this MIGRATE takes go in an
// Exclusive OpMoveOut: when a MIGRATE from another node of the group takes
// one of them between this node's read and its write, the op is refused
// and the keys are read again, so that of two MIGRATEs of one key only the
// one that took it may put it back. The keys moving already go in an
// ordinary OpMoveOut, which records their new destination.
func (c *Conn) takeKeys(m *migrateArgs, store *shards.Store, again []bool) error {
	for attempt := 1; ; attempt++ {
		if _, err := c.readNow(); err != nil {
			return err
		}
		var fresh, resend [][]byte
		for i, k := range m.keys {
			_, again[i] = store.Moving(k)
			if again[i] {
				if err := c.checkResend(k, m.addr); err != nil {
					return err
				}
				resend = append(resend, k)
			} else {
				fresh = append(fresh, k)
			}
		}
		var ops []shards.Op
		if len(resend) > 0 {
			ops = append(ops, shards.Op{Code: shards.OpMoveOut, Keys: resend, Dest: m.addr})
		}
		if len(fresh) > 0 {
			ops = append(ops, shards.Op{Code: shards.OpMoveOut, Keys: fresh, Dest: m.addr, Exclusive: true})
		}
		err := c.writeOps(ops)
		if err == nil || !errors.Is(err, shards.ErrMoving) || attempt == 3 {
			return err
		}
	}
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

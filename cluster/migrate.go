package cluster

import (
	"errors"
	"net"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// MIGRATE's phases, run by a Migration inside Mover.Run: take the keys
// out of the keyspace into the moving set (shards.OpMoveOut), where every
// command on them answers TRYAGAIN; restore them on the target, and again
// on the target group's other members when its answer allows; settle them
// (OpMoveDone for the keys the target took, OpMoveAbort for those it
// refused, the others left in flight). So a key's state exists in exactly
// one place at any instant. This package has no sockets and no log: the
// target (a RESP client) and the keyspace (the group's Backend) are
// injected, and the wire words the errors.

// ErrTargetUnreachable: MIGRATE's target could not be reached (nothing
// was sent): a key may be sent again at once, to another member of the
// target's group.
var ErrTargetUnreachable = errors.New("cluster: MIGRATE target could not be reached")

// ResendError refuses to send Key, in flight to Dest (a member of Group),
// anywhere else than a member of Group: its first RESTORE may have landed
// there, and the key must not land in two groups.
type ResendError struct {
	Key         []byte
	Dest, Group string
}

func (e *ResendError) Error() string {
	return "cluster: key " + string(e.Key) + " is in flight to " + e.Dest + ", a member of group " + e.Group
}

// InFlightError is a MIGRATE that failed (Err: the first key's failure)
// and left Keys keys in flight: they answer TRYAGAIN until a MIGRATE
// naming them again completes the move, or CLUSTER ABORTMOVE puts them
// back.
type InFlightError struct {
	Err  error
	Keys int
}

func (e *InFlightError) Error() string { return e.Err.Error() + " (keys left in flight)" }

// Unwrap returns the failure.
func (e *InFlightError) Unwrap() error { return e.Err }

// MoveKey is one key MIGRATE sends: its payload, and what became of it.
type MoveKey struct {
	Key     []byte
	Payload []byte
	Replace bool // RESTORE ... REPLACE
	Again   bool // in flight before this MIGRATE took it: never put back
	// Home: the target is a member of the group this key's slot moves to
	// from this group, which can hold the key only if a RESTORE from here
	// landed: its BUSYKEY means the move is done, and a key of unknown
	// outcome may be sent there again.
	Home bool
	// Restored: the target answered OK. Unknown: its RESTORE was (maybe
	// partly) sent and no reply came, so the target may or may not have it.
	Restored, Unknown bool
	// Err is why a key not restored was not: the target's refusal, or the
	// failure that left its outcome unknown.
	Err error
	// Retry: the target answered that it could not tell (leadership
	// changed, no leader), or could not be reached (nothing was sent).
	// Unlike a reply that never came, neither leaves a RESTORE that may
	// still land later, so the key may be sent again at once.
	Retry bool
}

// Target is MIGRATE's target as a Migration needs it: resp's RESP client
// (internal/respclient), which dials, authenticates and selects the
// database.
type Target interface {
	// Restore restores keys at addr within timeout (RESTORE, with ASKING
	// in a cluster), marking each Restored, Unknown or refused (Err, and
	// Retry when the answer allows sending it again at once: leadership
	// changed, no leader); a target answering BUSYKEY for a key Again or
	// Home holds it already (Restored). On failure it marks every key
	// not restored with the failure (Retry when it is
	// ErrTargetUnreachable) and returns the first failure.
	Restore(addr string, timeout time.Duration, keys []MoveKey) error
}

// MoveKeyspace is the group's keyspace as a Migration needs it: resp's
// Backend, through the connection that runs MIGRATE.
type MoveKeyspace interface {
	// ReadNow is a read barrier: what Moving reports after it includes
	// every op committed before.
	ReadNow() error
	// Moving returns the state of key when it is in flight.
	Moving(key []byte) (engine.State, bool)
	// Write submits ops in one write and returns the first error.
	Write(ops []shards.Op) error
}

// Migration is one MIGRATE (without COPY) of Keys to Addr, run holding the
// group's move lease (Mover.Run).
type Migration struct {
	Addr    string
	Timeout time.Duration // each exchange's, and the resend's budget
	Replace bool
	Keys    [][]byte // distinct
	// Keyspace and Target are required.
	Keyspace MoveKeyspace
	Target   Target
	// Routing returns this node's routing table; nil on a standalone
	// server (no resend, no destination checks).
	Routing func() *Routing
	// MoveDest returns where a key in flight was sent ("" unknown); nil
	// on a standalone server.
	MoveDest func(key []byte) string
	// Done ends the resend's pauses (the server shuts down); nil: never.
	Done <-chan struct{}
}

// Run moves the keys: take, restore (and resend), settle. It returns the
// number of keys that were sent (0: none of them exists, NOKEY) and the
// first key's failure, an *InFlightError when keys stay in flight, or the
// keyspace's error (a *ResendError when a key in flight elsewhere may not
// go to Addr).
func (m *Migration) Run() (int, error) {
	again := make([]bool, len(m.Keys)) // moving from an earlier failed MIGRATE
	if err := m.take(again); err != nil {
		return 0, err
	}
	if err := m.Keyspace.ReadNow(); err != nil {
		return 0, err
	}
	var keys []MoveKey
	for i, k := range m.Keys {
		if st, ok := m.Keyspace.Moving(k); ok {
			// A key moving to its slot's importing group, or sent again,
			// goes without REPLACE: the target holds it only if a RESTORE
			// from here landed, and its copy is then the one clients used
			// since.
			home := m.movesHome(k)
			keys = append(keys, MoveKey{Key: k, Payload: snapshot.EncodeDump(&st), Replace: m.Replace && !home && !again[i], Again: again[i], Home: home})
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if err := m.Target.Restore(m.Addr, m.Timeout, keys); err != nil && m.Routing != nil {
		m.resend(keys, err)
	}
	return len(keys), m.settle(keys)
}

// settle drops the keys the target took, puts back those it refused, and
// leaves in flight those of unknown outcome: putting one back could leave
// it admitting in both places. So does one an earlier MIGRATE left in
// flight (its RESTORE may have landed there). The next MIGRATE naming
// them sends them again (a BUSYKEY answer then means it had landed).
func (m *Migration) settle(keys []MoveKey) error {
	var done, back [][]byte
	var failed error // of the first key not restored
	inFlight := 0
	for _, k := range keys {
		if !k.Restored && failed == nil {
			failed = k.Err
		}
		switch {
		case k.Restored:
			done = append(done, k.Key)
		case !k.Unknown && !k.Again:
			back = append(back, k.Key)
		default:
			inFlight++
		}
	}
	ops := make([]shards.Op, 0, 2)
	if len(done) > 0 {
		ops = append(ops, shards.Op{Code: shards.OpMoveDone, Keys: done})
	}
	if len(back) > 0 {
		ops = append(ops, shards.Op{Code: shards.OpMoveAbort, Keys: back})
	}
	if len(ops) > 0 {
		if err := m.Keyspace.Write(ops); err != nil {
			return err
		}
	}
	if failed != nil && inFlight > 0 {
		return &InFlightError{Err: failed, Keys: inFlight}
	}
	return failed
}

// take takes the keys out of the keyspace into the moving set and sets
// again[i] for each key that an earlier MIGRATE had taken (sent again,
// never put back by this one). The keys this MIGRATE takes go in an
// Exclusive OpMoveOut: when a MIGRATE from another node of the group takes
// one of them between this node's read and its write, the op is refused
// and the keys are read again, so that of two MIGRATEs of one key only the
// one that took it may put it back. The keys moving already go in an
// ordinary OpMoveOut, which records their new destination.
func (m *Migration) take(again []bool) error {
	for attempt := 1; ; attempt++ {
		if err := m.Keyspace.ReadNow(); err != nil {
			return err
		}
		var fresh, resend [][]byte
		for i, k := range m.Keys {
			_, again[i] = m.Keyspace.Moving(k)
			if again[i] {
				if err := m.checkResend(k); err != nil {
					return err
				}
				resend = append(resend, k)
			} else {
				fresh = append(fresh, k)
			}
		}
		var ops []shards.Op
		if len(resend) > 0 {
			ops = append(ops, shards.Op{Code: shards.OpMoveOut, Keys: resend, Dest: m.Addr})
		}
		if len(fresh) > 0 {
			ops = append(ops, shards.Op{Code: shards.OpMoveOut, Keys: fresh, Dest: m.Addr, Exclusive: true})
		}
		if len(ops) == 0 {
			return nil
		}
		err := m.Keyspace.Write(ops)
		if err == nil || !errors.Is(err, shards.ErrMoving) || attempt == 3 {
			return err
		}
	}
}

// checkResend refuses to send key, in flight to another address, to Addr
// when its recorded destination is a member of a known group other than
// Addr's: the first RESTORE may have landed there. Another member of the
// same group (its leader changed), or any address when the first went
// outside the cluster, is fine.
func (m *Migration) checkResend(key []byte) error {
	if m.Routing == nil || m.MoveDest == nil {
		return nil
	}
	dest := m.MoveDest(key)
	r := m.Routing()
	if dest == "" || dest == m.Addr || r == nil {
		return nil
	}
	if g := r.GroupOfAddr(dest); g >= 0 && g != r.GroupOfAddr(m.Addr) {
		return &ResendError{Key: key, Dest: dest, Group: r.Groups[g].Name}
	}
	return nil
}

// movesHome reports whether Addr is a member of a known group that key's
// slot moves to from this node's group: that group imports it from here
// (as the routing table last showed it), or this group migrates it there
// (its own state). Such a group can hold a key of that slot only if it was
// restored from here.
func (m *Migration) movesHome(key []byte) bool {
	if m.Routing == nil {
		return false
	}
	r := m.Routing()
	if r == nil {
		return false
	}
	g := r.GroupOfAddr(m.Addr)
	if g < 0 || g == r.Self {
		return false
	}
	s := hashslot.Of(key)
	return r.Groups[g].Importing[s] == r.Groups[r.Self].Name || r.MigratingTo(s) == g
}

// resend sends the keys that went to a member of the group their slot
// moves to (Home) and may be sent again at once (Retry: the member
// answered that leadership changed or that the group has no leader, or
// could not be reached) again, without REPLACE, for up to one more
// Timeout: to the same member after an answer (no longer the leader, it
// forwards the RESTORE, with its ASKING, to the one that is), to the
// group's next member after a failure to connect. So a leader change in
// the target group during MIGRATE costs a retry, not an abandoned move. A
// resent key that had landed answers BUSYKEY (done), one that had not is
// restored now. A key whose reply did not come in time is not sent again
// here (its RESTORE may still be waiting at a stopped member, and every
// copy sent is one more that may land later): it stays in flight, and the
// next MIGRATE naming it completes the move.
func (m *Migration) resend(keys []MoveKey, last error) {
	var addrs []string
	deadline := time.Now().Add(m.Timeout)
	pause := 50 * time.Millisecond
	at := 0
	if errors.Is(last, ErrTargetUnreachable) {
		at = 1 // the first attempt could not reach Addr
	}
	var idx []int
	for {
		idx = idx[:0]
		for i := range keys {
			if keys[i].Home && keys[i].Retry && !keys[i].Restored {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return
		}
		if addrs == nil {
			if addrs = m.Routing().GroupAddrs(m.Addr); len(addrs) == 0 {
				return
			}
			at %= len(addrs)
		}
		left := time.Until(deadline)
		if left <= 0 || !m.pauseFor(min(pause, left)) {
			return
		}
		pause = min(2*pause, time.Second)
		if left = time.Until(deadline); left <= 0 {
			return
		}
		again := make([]MoveKey, len(idx))
		for j, i := range idx {
			again[j] = keys[i]
			again[j].Replace, again[j].Err, again[j].Retry = false, nil, false
		}
		err := m.Target.Restore(addrs[at], min(m.Timeout, left), again)
		for j, i := range idx {
			// A key whose earlier RESTORE may have landed is never put
			// back, whatever this attempt says (the slot may have been
			// closed meanwhile).
			again[j].Unknown = again[j].Unknown || (keys[i].Unknown && !again[j].Restored)
			keys[i] = again[j]
		}
		if errors.Is(err, ErrTargetUnreachable) {
			at = (at + 1) % len(addrs)
		}
	}
}

// pauseFor waits d; false when Done ends first.
func (m *Migration) pauseFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-m.Done:
		return false
	}
}

// GroupAddrs returns addr and then the RESP addresses of the other members
// of the known group addr belongs to (its leader first, as the routing
// table orders them); nil when r is nil or addr is in no known group other
// than this node's. A member advertising an unspecified host is reached on
// addr's host.
func (r *Routing) GroupAddrs(addr string) []string {
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

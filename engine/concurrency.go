package engine

import (
	"errors"
	"strconv"
)

// In-flight (concurrency) limits: CC.ACQUIRE holds units until CC.RELEASE,
// or until its ttl passes without CC.RENEW, so that at most max units are
// held at once and a crashed holder frees its units by itself.
//
// State layout (KindConcurrency):
//
//	Leases    the held leases and the waiters (Lease.Waiting), the
//	          waiters in arrival order; every lease holds at least one
//	          unit and expires after the instant it was last taken or
//	          renewed; a waiter leaves at its deadline (its ExpireAt)
//	A         the units held (the sum of the held leases' Units)
//	B         the number of lease ids this key has made (the counter in
//	          the ids of acquires without ID)
//	C         the number of waiters (0 without any: the state of a key
//	          before waiting existed, so older snapshots read the same)
//	ExpireAt  the latest lease expiry or waiter deadline: the key is
//	          deleted when nothing is held and nobody waits
//
// Waiting in line (CC.ACQUIRE … WAIT duration): a limited acquire that
// waits joins the key's line, in the state, so the line is replicated,
// snapshotted and moved like the leases (a failover keeps every place).
// Every op on the key at now first drops expired leases and waiters past
// their deadline, then grants waiters from the head while the head's units
// fit (strict first come, first served: a newcomer never overtakes a
// waiter, and remaining counts the waiting units). A granted waiter
// becomes a held lease at once, in the same op; Granted, comparing the
// states before and after the op, gives its allowed reply, so every node
// applying the op learns of the grant and the one holding the waiting client
// answers it. Leases expire lazily: a grant owed to an expiry happens at
// the next op on the key (the waiting node asks again at retry_after,
// with the same id, which is idempotent). A waiter never holds units, so
// a client that gives up or disconnects never makes the key admit more
// than max: its node removes it (CC.RELEASE, or an acquire without WAIT
// at its deadline), and failing that it leaves at its deadline, and a
// lease granted to nobody frees itself at its ttl.
//
// Bound: at most max units are held at any instant, while max stays the
// same (a lowered max admits nothing until enough is released). A key
// holds at most MaxLeases leases, each at most MaxLeaseID bytes of id.
//
// Determinism: an id the engine makes is a function of the stamped now and
// the key's counter (B), so every replica applying the same log makes the
// same id; nothing here reads a clock or a random source.
//
// Sharing: Leases is never written in place; a change returns a new array,
// so a copy of the state may share it.

// LeaseOp is what a concurrency request does.
type LeaseOp uint8

// The concurrency operations (Request.Op).
const (
	LeaseAcquire LeaseOp = iota + 1 // CC.ACQUIRE
	LeaseRelease                    // CC.RELEASE
	LeaseRenew                      // CC.RENEW
)

// Lease is one held lease of a concurrency key.
type Lease struct {
	// ID names the lease: 1..MaxLeaseID bytes.
	ID string
	// Units is how many units it holds, 1..MaxCount.
	Units int64
	// ExpireAt is the instant (Unix ns) it frees itself unless renewed;
	// for a waiter, its deadline (it leaves the line then, not granted).
	ExpireAt int64
	// Max and TTL are a waiter's (a CC.ACQUIRE with WAIT in line): it is
	// granted while the units held plus its Units fit in Max, and then
	// holds a lease expiring TTL after the grant. Both 0 for a held lease.
	Max, TTL int64
}

// Waiting reports whether l is a waiter in line, not a held lease.
func (l *Lease) Waiting() bool { return l.TTL != 0 }

// Limits of a concurrency key.
const (
	// MaxLeaseID bounds a lease id's length in bytes.
	MaxLeaseID = 64
	// MaxLeases bounds the leases one key holds at once: an acquire that
	// would take one more is limited as if max units were held (its
	// retry_after is the earliest lease's expiry). It bounds a key's memory
	// when max is large and each lease small.
	MaxLeases = 100000
)

// ErrLeaseID is returned for a lease id that is empty or longer than
// MaxLeaseID bytes.
var ErrLeaseID = errors.New("lease id must be 1 to 64 bytes")

// ParseLease parses the arguments after the key of a concurrency command:
//
//	LeaseAcquire  CC.ACQUIRE  max ttl [COST n] [ID lease] [WAIT duration]
//	LeaseRelease  CC.RELEASE  lease
//	LeaseRenew    CC.RENEW    lease ttl
//
// max and n are counts (ParseInt, n defaults to 1, both 1..MaxCount), ttl a
// duration (ParseDuration, 1ms..MaxPeriod); the options come in any order
// and letter case, each at most once. Errors are ParseRequest's, and
// ErrLeaseID for an id that is empty or longer than MaxLeaseID. WAIT, last,
// sets Request.Wait (0 up to MaxWait, as for the other limiters; the
// server caps it by max-wait). The request passes Validate.
func ParseLease(op LeaseOp, args [][]byte) (Request, error) {
	r := Request{Kind: KindConcurrency, Op: op}
	switch op {
	case LeaseRelease:
		if len(args) != 1 {
			return Request{}, ErrArity
		}
		r.Lease = string(args[0])
	case LeaseRenew:
		if len(args) != 2 {
			return Request{}, ErrArity
		}
		r.Lease = string(args[0])
		ttl, err := parsePeriod(KindConcurrency, args[1])
		if err != nil {
			return Request{}, err
		}
		r.Period = ttl
	case LeaseAcquire:
		if len(args) < 2 {
			return Request{}, ErrArity
		}
		var err error
		if r.Burst, err = ParseInt(args[0]); err != nil {
			return Request{}, intErr(KindConcurrency, fBurst, args[0], err)
		}
		if r.Period, err = parsePeriod(KindConcurrency, args[1]); err != nil {
			return Request{}, err
		}
		r.Quantity = 1
		var costText []byte
		seenCost, seenID, seenWait := false, false, false
		for rest := args[2:]; len(rest) > 0; rest = rest[2:] {
			if len(rest) < 2 {
				return Request{}, ErrSyntax
			}
			switch {
			case equalFold(rest[0], "cost") && !seenCost:
				seenCost, costText = true, rest[1]
				if r.Quantity, err = ParseInt(rest[1]); err != nil {
					return Request{}, intErr(KindConcurrency, fQuantity, rest[1], err)
				}
			case equalFold(rest[0], "wait") && !seenWait && len(rest) == 2:
				// WAIT comes last, as for every limiter command.
				seenWait = true
				if r.Wait, err = parseWait(KindConcurrency, rest[1]); err != nil {
					return Request{}, err
				}
			case equalFold(rest[0], "id") && !seenID:
				seenID = true
				r.Lease = string(rest[1])
				if r.Lease == "" {
					return Request{}, ErrLeaseID
				}
			default:
				return Request{}, ErrSyntax
			}
		}
		if err := r.Validate(); err != nil {
			if ae, ok := err.(*ArgError); ok {
				switch ae.field {
				case fBurst:
					ae.Value = string(args[0])
				case fPeriod:
					ae.Value = string(args[1])
				case fQuantity:
					if costText != nil {
						ae.Value = string(costText)
					}
				}
			}
			return Request{}, err
		}
		return r, nil
	default:
		return Request{}, ErrSyntax
	}
	if err := r.Validate(); err != nil {
		if ae, ok := err.(*ArgError); ok && ae.field == fPeriod {
			ae.Value = string(args[1])
		}
		return Request{}, err
	}
	return r, nil
}

// validateLease is Validate's part for KindConcurrency: an acquire has
// max and cost in 1..MaxCount and a ttl in 1ns..MaxPeriod; a renew a ttl
// and a lease id; a release a lease id only. An acquire's id may be
// empty (the engine makes one).
func (r *Request) validateLease() error {
	k := KindConcurrency
	if r.Rate != 0 || r.Interval || r.Exact {
		return ErrSyntax
	}
	if len(r.Lease) > MaxLeaseID || (r.Op != LeaseAcquire && r.Lease == "") {
		return ErrLeaseID
	}
	checkTTL := func() error { return inRange(k, fPeriod, r.Period, MaxPeriod) }
	switch {
	case r.Wait < 0:
		return argErr(k, fWait, r.Wait, ErrNegative)
	case r.Wait > MaxWait:
		return argErr(k, fWait, r.Wait, ErrNotInteger)
	case r.Wait > 0 && r.Op != LeaseAcquire:
		return ErrSyntax
	}
	switch r.Op {
	case LeaseAcquire:
		if err := inRange(k, fBurst, r.Burst, MaxCount); err != nil {
			return err
		}
		if err := checkTTL(); err != nil {
			return err
		}
		if err := inRange(k, fQuantity, r.Quantity, MaxCount); err != nil {
			return err
		}
	case LeaseRenew:
		if r.Burst != 0 || r.Quantity != 0 || r.Shadow {
			return ErrSyntax
		}
		return checkTTL()
	case LeaseRelease:
		if r.Burst != 0 || r.Quantity != 0 || r.Period != 0 || r.Shadow {
			return ErrSyntax
		}
	default:
		return ErrSyntax
	}
	return nil
}

// applyLease runs a concurrency request (see the layout above and the
// line of waiters below). Every op first drops the leases expired at now
// (counted in ExpiredLeases) and the waiters past their deadline, then
// grants the waiters at the head of the line while their units fit.
//
// Acquire: an id already held is renewed (expiry now + ttl) and holds no
// more units; an id waiting keeps its place (its deadline now + Wait) when
// the request waits, and leaves the line, limited, when it does not;
// otherwise a request of n units is allowed while nobody waits, held + n <=
// max (and the key holds fewer than MaxLeases leases and waiters), holding
// a new lease. Limited, it joins the line when it waits (Queued). Limited:
// retry_after is the time until the earliest held lease expires (-1 when
// none is held), -1 when n > max (which never waits). Release and renew
// answer Limited when the lease is not held; a release of a waiting id
// removes it from the line (answered as released); a renew sets the
// lease's expiry to now + ttl.
func applyLease(st State, req *Request, now int64) (State, Result) {
	var leases []Lease
	counter := int64(0)
	if st.Kind == KindConcurrency && st.ExpireAt > now {
		leases, counter = st.Leases, st.B
	}
	expired, gone := 0, 0
	for _, l := range leases {
		if l.ExpireAt <= now {
			gone++
			if !l.Waiting() {
				expired++
			}
		}
	}
	if gone > 0 {
		live := make([]Lease, 0, len(leases)-gone)
		for _, l := range leases {
			if l.ExpireAt > now {
				live = append(live, l)
			}
		}
		leases = live
	}
	if st.Kind == KindConcurrency && st.ExpireAt <= now {
		expired = 0 // the whole key expired: all of its held leases
		for _, l := range st.Leases {
			if !l.Waiting() {
				expired++
			}
		}
	}
	leases = grantWaiters(leases, now)
	pos := -1
	if req.Lease != "" {
		for i := range leases {
			if leases[i].ID == req.Lease {
				pos = i
				break
			}
		}
	}
	res := Result{Limit: req.Burst, RetryAfter: -1, ExpiredLeases: int64(expired)}
	changed := gone > 0 || (len(st.Leases) > 0 && len(leases) > 0 && &leases[0] != &st.Leases[0])
	held, waiting, _ := tally(leases)
	switch req.Op {
	case LeaseAcquire:
		// The id this acquire holds, or would hold: a limited result
		// names it too (the wire answers nil for a refusal, and a
		// shadowed refusal, answered allowed, names a lease not held).
		id := req.Lease
		if id == "" {
			id = leaseID(now, counter+1)
		}
		res.Lease = id
		wait := req.Wait > 0 && !req.Shadow
		switch {
		case pos >= 0 && !leases[pos].Waiting():
			leases = withExpiry(leases, pos, now+req.Period)
			changed = true
		case pos >= 0 && wait:
			// Waiting already (a retry, or the waiting node asking
			// again): it keeps its place, its deadline now + Wait.
			leases = withExpiry(leases, pos, now+req.Wait)
			res.Limited, res.Queued = true, true
			res.RetryAfter = earliestHeld(leases, now)
			changed = true
		case pos >= 0:
			// Waiting, and asking not to wait any more (its deadline
			// has come): it leaves the line, limited (the grants above
			// found no units for it).
			leases = grantWaiters(without(leases, pos), now)
			res.Limited = true
			res.RetryAfter = earliestHeld(leases, now)
			changed = true
		case req.Quantity > req.Burst:
			res.Limited = true
		case waiting > 0 || held+req.Quantity > req.Burst || len(leases) >= MaxLeases:
			res.Limited = true
			res.RetryAfter = earliestHeld(leases, now)
			if wait && len(leases) < MaxLeases {
				if req.Lease == "" {
					counter++
				}
				leases = append(leases[:len(leases):len(leases)], Lease{ID: id, Units: req.Quantity, ExpireAt: now + req.Wait, Max: req.Burst, TTL: req.Period})
				res.Queued = true
				changed = true
			}
		default:
			if req.Lease == "" {
				counter++
			}
			leases = append(leases[:len(leases):len(leases)], Lease{ID: id, Units: req.Quantity, ExpireAt: now + req.Period})
			changed = true
		}
	case LeaseRelease, LeaseRenew:
		if pos < 0 || (req.Op == LeaseRenew && leases[pos].Waiting()) {
			res.Limited = true
			break
		}
		if req.Op == LeaseRenew {
			leases = withExpiry(leases, pos, now+req.Period)
		} else {
			leases = grantWaiters(without(leases, pos), now)
		}
		changed = true
	}
	held, waiting, latest := tally(leases)
	if req.Op == LeaseAcquire {
		res.Remaining = max(req.Burst-held-waiting, 0)
	}
	if latest > now {
		res.ResetAfter = latest - now
	}
	if !changed {
		return st, res // the state as it was (a missing key stays missing)
	}
	if len(leases) == 0 {
		return State{}, res // nothing held, nobody waits: the key is deleted
	}
	next := State{Kind: KindConcurrency, A: held, B: counter, Leases: leases}
	for _, l := range leases {
		next.ExpireAt = max(next.ExpireAt, l.ExpireAt)
		if l.Waiting() {
			next.C++
		}
	}
	return next, res
}

// grantWaiters grants the waiters at the head of the line, in arrival
// order, while the units each asks for fit under its max: a granted waiter
// becomes a lease held from now for its ttl, in its place in leases. A
// waiter that does not fit stops the granting (nobody overtakes it). It
// returns leases, a new array when it granted any. Granting never adds an
// entry, so the key's MaxLeases bound holds.
func grantWaiters(leases []Lease, now int64) []Lease {
	held, _, _ := tally(leases)
	copied := false
	for i := range leases {
		w := leases[i]
		if !w.Waiting() {
			continue
		}
		if held+w.Units > w.Max {
			break
		}
		if !copied {
			leases, copied = append([]Lease(nil), leases...), true
		}
		leases[i] = Lease{ID: w.ID, Units: w.Units, ExpireAt: now + w.TTL}
		held += w.Units
	}
	return leases
}

// tally returns the units leases hold, the units waiting and the latest
// expiry of a held lease (0 when none is held).
func tally(leases []Lease) (held, waiting, latest int64) {
	for _, l := range leases {
		if l.Waiting() {
			waiting += l.Units
		} else {
			held += l.Units
			latest = max(latest, l.ExpireAt)
		}
	}
	return held, waiting, latest
}

// earliestHeld returns the time from now until the earliest held lease
// expires, -1 when none is held.
func earliestHeld(leases []Lease, now int64) int64 {
	t := int64(-1)
	for _, l := range leases {
		if !l.Waiting() && (t < 0 || l.ExpireAt < t) {
			t = l.ExpireAt
		}
	}
	if t < 0 {
		return -1
	}
	return t - now
}

// without returns a copy of leases without entry pos.
func without(leases []Lease, pos int) []Lease {
	next := make([]Lease, 0, len(leases)-1)
	return append(append(next, leases[:pos]...), leases[pos+1:]...)
}

// Granted appends to dst the allowed replies (Lease naming each, in
// arrival order) of the waiters that an op granted, given the key's state
// before it (as given to Apply) and after it (as returned): a waiter of
// before that after holds as a lease. The reply's fields are those at now:
// limit the waiter's max, remaining max minus the units held and waiting,
// retry_after -1, reset_after the time until every held lease expires.
// Only a state with waiters (C > 0) can grant any, so a caller skips the
// call when before.C == 0.
func Granted(before, after *State, now int64, dst []Result) []Result {
	if before.Kind != KindConcurrency || before.C == 0 || before.ExpireAt <= now || after.Kind != KindConcurrency {
		return dst
	}
	held, waiting, latest := tally(after.Leases)
	// Entries keep their relative order (a grant turns a waiter into a
	// lease in its place; ops only remove entries or append new ones),
	// and grants go from the head of the line: one walk of both lists,
	// ending at the first waiter that still waits.
	j := 0
	for i := range before.Leases {
		w := &before.Leases[i]
		if !w.Waiting() || w.ExpireAt <= now {
			continue // a lease, or a waiter past its deadline (dropped first)
		}
		k := j
		for k < len(after.Leases) && after.Leases[k].ID != w.ID {
			k++
		}
		if k == len(after.Leases) {
			continue // it left the line (its deadline, a release)
		}
		if after.Leases[k].Waiting() {
			break
		}
		dst = append(dst, Result{Limit: w.Max, Remaining: max(w.Max-held-waiting, 0), RetryAfter: -1, ResetAfter: max(latest-now, 0), Lease: w.ID})
		j = k + 1
	}
	return dst
}

// withExpiry returns a copy of leases with lease pos expiring at t.
func withExpiry(leases []Lease, pos int, t int64) []Lease {
	next := append([]Lease(nil), leases...)
	next[pos].ExpireAt = t
	return next
}

// leaseID is the id an acquire without ID holds: the stamped instant and
// the key's counter, in base 36 ("<now>-<counter>"), the same on every
// replica. A key's counter restarts when the key is deleted (nothing
// held), and the instant moves on meanwhile, so an id is not reused by a
// later lease of the key unless the clock stands still across a delete.
func leaseID(now, counter int64) string {
	b := make([]byte, 0, 24)
	b = strconv.AppendInt(b, now, 36)
	b = append(b, '-')
	return string(strconv.AppendInt(b, counter, 36))
}

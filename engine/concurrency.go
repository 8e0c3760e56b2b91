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
//	Leases    the held leases, in the order they were taken; every lease
//	          holds at least one unit and expires after the instant it was
//	          last taken or renewed
//	A         the units held (the sum of the leases' Units)
//	B         the number of lease ids this key has made (the counter in
//	          the ids of acquires without ID)
//	C         unused, 0
//	ExpireAt  the latest lease expiry: the key is deleted when nothing is
//	          held any more
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
	// ExpireAt is the instant (Unix ns) it frees itself unless renewed.
	ExpireAt int64
}

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
//	LeaseAcquire  CC.ACQUIRE  max ttl [COST n] [ID lease]
//	LeaseRelease  CC.RELEASE  lease
//	LeaseRenew    CC.RENEW    lease ttl
//
// max and n are counts (ParseInt, n defaults to 1, both 1..MaxCount), ttl a
// duration (ParseDuration, 1ms..MaxPeriod); the options come in any order
// and letter case, each at most once. Errors are ParseRequest's, and
// ErrLeaseID for an id that is empty or longer than MaxLeaseID. The
// request passes Validate. WAIT is not parsed here (see the resp layer).
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
		seenCost, seenID := false, false
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

// applyLease runs a concurrency request (see the layout above). Every op
// first drops the leases expired at now (counted in ExpiredLeases).
//
// Acquire: an id already held is renewed (expiry now + ttl) and holds no
// more units; otherwise a request of n units is allowed while held + n <=
// max (and the key holds fewer than MaxLeases leases), holding a new
// lease. Limited: retry_after is the time until the earliest lease
// expires, -1 when n > max. Release and renew answer Limited when the
// lease is not held; a renew sets the lease's expiry to now + ttl.
func applyLease(st State, req *Request, now int64) (State, Result) {
	var leases []Lease
	var held int64
	counter := int64(0)
	if st.Kind == KindConcurrency && st.ExpireAt > now {
		leases, counter = st.Leases, st.B
	}
	expired := 0
	for _, l := range leases {
		if l.ExpireAt <= now {
			expired++
		} else {
			held += l.Units
		}
	}
	if expired > 0 {
		live := make([]Lease, 0, len(leases)-expired)
		for _, l := range leases {
			if l.ExpireAt > now {
				live = append(live, l)
			}
		}
		leases = live
	}
	if st.Kind == KindConcurrency && st.ExpireAt <= now {
		expired = len(st.Leases) // the whole key expired: all of them
	}
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
	changed := expired > 0
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
		switch {
		case pos >= 0:
			leases = withExpiry(leases, pos, now+req.Period)
			changed = true
		case req.Quantity > req.Burst:
			res.Limited = true
		case held+req.Quantity > req.Burst || len(leases) >= MaxLeases:
			res.Limited = true
			res.RetryAfter = earliest(leases) - now
		default:
			if req.Lease == "" {
				counter++
			}
			leases = append(leases[:len(leases):len(leases)], Lease{ID: id, Units: req.Quantity, ExpireAt: now + req.Period})
			held += req.Quantity
			changed = true
		}
		res.Remaining = max(req.Burst-held, 0)
	case LeaseRelease, LeaseRenew:
		if pos < 0 {
			res.Limited = true
			break
		}
		if req.Op == LeaseRenew {
			leases = withExpiry(leases, pos, now+req.Period)
		} else {
			held -= leases[pos].Units
			next := make([]Lease, 0, len(leases)-1)
			next = append(append(next, leases[:pos]...), leases[pos+1:]...)
			leases = next
		}
		changed = true
	}
	if !changed {
		// Nothing changed: the state as it was (a missing key stays
		// missing), and its reset_after.
		if len(leases) > 0 {
			res.ResetAfter = st.ExpireAt - now
		}
		return st, res
	}
	if len(leases) == 0 {
		return State{}, res // nothing held: the key is deleted
	}
	next := State{Kind: KindConcurrency, A: held, B: counter, Leases: leases}
	for _, l := range leases {
		next.ExpireAt = max(next.ExpireAt, l.ExpireAt)
	}
	res.ResetAfter = next.ExpireAt - now
	return next, res
}

// withExpiry returns a copy of leases with lease pos expiring at t.
func withExpiry(leases []Lease, pos int, t int64) []Lease {
	next := append([]Lease(nil), leases...)
	next[pos].ExpireAt = t
	return next
}

// earliest returns the earliest expiry of leases (not empty).
func earliest(leases []Lease) int64 {
	t := leases[0].ExpireAt
	for _, l := range leases[1:] {
		t = min(t, l.ExpireAt)
	}
	return t
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

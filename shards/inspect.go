package shards

import "github.com/cellserver/cellserver/engine"

// Inspection is what CL.INSPECT reports of a key: its state described
// with the parameters it was last used with, without changing it.
type Inspection struct {
	// Kind is the key's limiter.
	Kind engine.Kind
	// Known is false when the parameters are not remembered (Inspect) or
	// cannot peek; the parameter fields and Limit and Remaining are then
	// unknown.
	Known bool
	// Params are the parameters the key was last used with.
	Params Params
	// Limit and Remaining are what a request of Params would find: a peek
	// (quantity 0), or for a concurrency key max and the units its live
	// leases leave.
	Limit, Remaining int64
	// TTL is the time until the key expires, in milliseconds rounded up.
	TTL int64
	// Leases are a concurrency key's live held leases (nil for other
	// kinds); their ExpireAt is as stored.
	Leases []engine.Lease
	// Waiting are a concurrency key's acquires waiting in line before
	// their deadline (ExpireAt), in arrival order; nil when none.
	Waiting []engine.Lease
}

// Describe describes st, found by Inspect with parameters p (known: p
// remembered) at now.
func Describe(st engine.State, p Params, known bool, now int64) Inspection {
	in := Inspection{Kind: st.Kind, Known: known, Params: p, TTL: engine.CeilMillis(st.ExpireAt - now)}
	switch {
	case st.Kind == engine.KindConcurrency:
		in.Leases = make([]engine.Lease, 0, len(st.Leases)) // a new slice: the store's is shared
		held := int64(0)                                    // units held and waiting: what an acquire finds taken
		for _, l := range st.Leases {
			switch {
			case l.ExpireAt <= now:
				continue
			case l.Waiting():
				in.Waiting = append(in.Waiting, l)
			default:
				in.Leases = append(in.Leases, l)
			}
			held += l.Units
		}
		in.Limit, in.Remaining = p.Burst, max(p.Burst-held, 0)
	case known:
		peek := p.Request(st.Kind, 0)
		if peek.Validate() != nil {
			in.Known = false // parameters that cannot peek (never stored so)
		} else {
			_, r := engine.Apply(st, &peek, now)
			in.Limit, in.Remaining = r.Limit, r.Remaining
		}
	}
	return in
}

// InspectField is one numeric field of an inspection, in CL.INSPECT's
// order; Unknown when its value is.
type InspectField struct {
	Name    string
	Value   int64
	Unknown bool
}

// Fields returns the inspection's numeric fields: the parameters (burst,
// rate, period_ms, interval), the peek's limit and remaining, and reset_ms
// and ttl_ms (both the time to expiry, as redis-cell's reset).
func (in *Inspection) Fields() []InspectField {
	interval := int64(0)
	if in.Params.Interval {
		interval = 1
	}
	unknown := !in.Known
	return []InspectField{
		{"burst", in.Params.Burst, unknown},
		{"rate", in.Params.Rate, unknown},
		{"period_ms", engine.CeilMillis(in.Params.Period), unknown},
		{"interval", interval, unknown},
		{"limit", in.Limit, unknown},
		{"remaining", in.Remaining, unknown},
		{"reset_ms", in.TTL, false},
		{"ttl_ms", in.TTL, false},
	}
}

package decide

import (
	"strconv"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/limitpolicy"
	"github.com/cellserver/cellserver/shards"
)

// Rules is the path's first stage: the operator's limit-override and
// limit-shadow rules (internal/limitpolicy), applied to a limiter op
// before it goes further, so that the op every later stage sees — the
// region gate, a forwarded REGION.EXEC, the group's log — carries the
// final parameters and shadow flag (limitpolicy's DESIGN.md, "Where the
// rules are applied"). A door applies them where it parses a request, so
// that a refusal answers that request alone (a queued MULTI command
// included). The zero Rules applies none. Safe for concurrent use.
type Rules struct {
	// Policy holds the rules; nil applies none. It changes live (CONFIG
	// SET limit-override, limit-shadow); Apply reads it once per request.
	Policy *limitpolicy.Policy
	// Parse holds the limits an overridden request must keep
	// (sl-max-limit).
	Parse engine.ParseOptions
}

// Apply rewrites the requests of op (parsed, on keys) by the rules: an
// override's parameters replace the caller's, a shadow pattern sets
// engine.Request.Shadow. Ops other than limiter requests pass unchanged.
// An override that would make a request invalid refuses the op with a
// *RuleError, leaving the requests before it rewritten: the caller
// answers the error and submits nothing.
func (r Rules) Apply(op *shards.Op) error {
	if r.Policy == nil || op.Code != shards.OpLimit && op.Code != shards.OpLimitAll {
		return nil
	}
	for i := range op.Reqs {
		if err := r.Policy.Apply(op.Keys[i], &op.Reqs[i], r.Parse); err != nil {
			e := &RuleError{Err: err}
			if op.Code == shards.OpLimitAll {
				e.Limit = i + 1
			}
			return e
		}
	}
	return nil
}

// ApplyRequest is Apply for one limiter request, req on key, for a door
// that builds its ops itself (the Envoy service: rls.Rules): an override's
// parameters replace req's, a shadow pattern sets req.Shadow. An override
// that would make req invalid leaves it unchanged and returns a
// *RuleError (Limit 0).
func (r Rules) ApplyRequest(key []byte, req *engine.Request) error {
	if r.Policy == nil {
		return nil
	}
	if err := r.Policy.Apply(key, req, r.Parse); err != nil {
		return &RuleError{Err: err}
	}
	return nil
}

// RuleError is Rules.Apply's refusal: an override's parameters are not a
// valid request of the op's kind (a sliding-log limit above sl-max-limit).
type RuleError struct {
	// Limit is the refused request's position (from 1) in a
	// CL.THROTTLEALL-shaped op (OpLimitAll), 0 for a single request.
	Limit int
	// Err names the rule and what is wrong (limitpolicy's wording).
	Err error
}

func (e *RuleError) Error() string {
	if e.Limit > 0 {
		return "limit " + strconv.Itoa(e.Limit) + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *RuleError) Unwrap() error { return e.Err }

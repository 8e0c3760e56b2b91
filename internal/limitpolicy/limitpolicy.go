package limitpolicy

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/internal/rules"
)

// MaxRules bounds each list (glob.MaxRules), and glob.MaxPatternLen each
// pattern: a list is compiled into one glob.Table, matched in one pass
// over the key whatever its number of rules, and the caps bound its
// compilation and the cost of a key whose path it has not cached.
const MaxRules = glob.MaxRules

// Errors of Parse.
var (
	// ErrRuleArity is returned for an override list whose words do not
	// come in groups of four (pattern burst rate period).
	ErrRuleArity = errors.New("expected groups of: pattern burst rate period")
	// ErrTooManyRules is returned for more than MaxRules rules.
	ErrTooManyRules = glob.ErrTooManyRules
	// ErrPatternTooLong is returned for a pattern longer than
	// glob.MaxPatternLen.
	ErrPatternTooLong = glob.ErrPatternTooLong
)

// Override is one limit-override rule: requests on keys matching Pattern
// take Burst, Rate and Period instead of the caller's.
//
// Per command family: Burst replaces CL.THROTTLE's and CL.THROTTLEALL's
// max_burst, TB.TAKE's and LB.ADD's capacity, and FW.INCR's, SW.INCR's and
// SL.ADD's limit; Rate replaces count_per_period, refill_tokens and
// leak_count (the window limiters have none and ignore it); Period
// replaces period, refill_period, leak_period and window. The quantity and
// TB.TAKE's INTERVAL stay the caller's. For CC.ACQUIRE, Burst replaces max
// and nothing else applies: the ttl and cost stay the caller's (the ttl is
// how long the holder may take before it renews, not a limit), and
// CC.RELEASE and CC.RENEW pass unchanged (they are neither overridden nor
// shadowed).
type Override struct {
	Pattern string
	// Burst is 0..engine.MaxCount; Rate 1..engine.MaxCount; Period in
	// nanoseconds, 1 ms..engine.MaxPeriod.
	Burst, Rate, Period int64
}

// String is the rule as the setting writes it: pattern (quoted when it
// holds a space or quote), burst, rate, period (seconds, or ms when not
// whole).
func (o Override) String() string { return string(appendOverride(nil, o)) }

func appendOverride(b []byte, o Override) []byte {
	b = append(b, rules.QuotePattern(o.Pattern)...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, o.Burst, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, o.Rate, 10)
	b = append(b, ' ')
	if o.Period%int64(time.Second) == 0 {
		return strconv.AppendInt(b, o.Period/int64(time.Second), 10)
	}
	return append(strconv.AppendInt(b, o.Period/int64(time.Millisecond), 10), "ms"...)
}

// overrideSyntax is limit-override's: "pattern burst rate period",
// repeated.
var overrideSyntax = rules.Syntax[Override]{
	Pattern: func(o Override) string { return o.Pattern },
	Read:    readOverride,
	Append:  appendOverride,
}

// shadowSyntax is limit-shadow's: patterns.
var shadowSyntax = rules.Syntax[string]{
	Pattern: func(p string) string { return p },
	Read:    func(w []string, _ int) (string, int, error) { return w[0], 1, nil },
	Append:  func(b []byte, p string) []byte { return append(b, rules.QuotePattern(p)...) },
}

// ParseOverrides reads limit-override's value: zero or more rules, each
// "pattern burst rate period" (words separated by spaces; a pattern with a
// space is quoted). The period is a duration as the limiter commands take
// it: whole seconds, or a number with a unit ms, s, m, h, d.
func ParseOverrides(v string) ([]Override, error) { return overrideSyntax.Parse(v) }

func readOverride(w []string, n int) (Override, int, error) {
	if len(w) < 4 {
		return Override{}, 0, ErrRuleArity
	}
	o := Override{Pattern: w[0]}
	var err error
	if o.Burst, err = count(w[1], "burst", 0); err == nil {
		if o.Rate, err = count(w[2], "rate", 1); err == nil {
			o.Period, err = period(w[3])
		}
	}
	if err != nil {
		return Override{}, 0, fmt.Errorf("rule %d (%s): %w", n, rules.QuotePattern(o.Pattern), err)
	}
	return o, 4, nil
}

func count(w, name string, least int64) (int64, error) {
	n, err := engine.ParseInt([]byte(w))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %q: %w", name, w, err)
	case n < least || n > engine.MaxCount:
		return 0, fmt.Errorf("%s %d is not in %d..2^40", name, n, least)
	}
	return n, nil
}

func period(w string) (int64, error) {
	ns, err := engine.ParseDuration([]byte(w))
	switch {
	case err != nil:
		return 0, fmt.Errorf("period %q: %w", w, err)
	case ns < int64(time.Millisecond) || ns > engine.MaxPeriod:
		return 0, fmt.Errorf("period %q is not in 1ms..3660d", w)
	}
	return ns, nil
}

// ParseShadow reads limit-shadow's value: zero or more patterns separated
// by spaces (quoted when they hold one).
func ParseShadow(v string) ([]string, error) { return shadowSyntax.Parse(v) }

// FormatOverrides writes rules as ParseOverrides reads them.
func FormatOverrides(rules []Override) string { return overrideSyntax.Format(rules) }

// FormatShadow writes patterns as ParseShadow reads them.
func FormatShadow(patterns []string) string { return shadowSyntax.Format(patterns) }

// Policy is a node's rule set and its counters. The zero Policy has no
// rules. Each list is a rules.Table in force, replaced whole by its setter
// (a list longer than MaxRules, which Parse refuses, still works, at the
// cost of its compilation).
type Policy struct {
	overrides rules.Live[Override]
	shadow    rules.Live[string]

	overridden atomic.Uint64 // requests whose parameters a rule replaced
	shadowed   atomic.Uint64 // requests sent as shadow
}

// SetOverrides replaces the override rules.
func (p *Policy) SetOverrides(o []Override) { p.overrides.Store(overrideSyntax.Compile(o)) }

// SetShadow replaces the shadow patterns.
func (p *Policy) SetShadow(s []string) { p.shadow.Store(shadowSyntax.Compile(s)) }

// Overrides returns the override rules in force (not to be modified).
func (p *Policy) Overrides() []Override { return p.overrides.Load().Rules() }

// Shadow returns the shadow patterns in force (not to be modified).
func (p *Policy) Shadow() []string { return p.shadow.Load().Rules() }

// Match is what the rules say of one key.
type Match struct {
	// Override is the first override rule matching the key, or nil.
	Override *Override
	// Shadow is the first shadow pattern matching the key, or "" (with
	// ShadowOK false).
	Shadow   string
	ShadowOK bool
}

// Lookup returns the rules matching key.
func (p *Policy) Lookup(key []byte) Match {
	var m Match
	m.Override = p.overrides.Load().Lookup(key)
	if s := p.shadow.Load().Lookup(key); s != nil {
		m.Shadow, m.ShadowOK = *s, true
	}
	return m
}

// Apply rewrites req, a request on key, by the rules: the first matching
// override replaces its parameters (see Override), a matching shadow
// pattern sets req.Shadow. A request the override makes invalid for its
// kind (a limit of 0 for a window limiter, a sliding log's limit above
// opt's maximum, a span beyond engine.MaxSpan) fails with that error,
// wrapped with the rule's pattern; req is then unchanged. With no rules
// Apply costs two atomic loads; with rules, one pass over the key per list
// (glob.Table), whatever their number.
func (p *Policy) Apply(key []byte, req *engine.Request, opt engine.ParseOptions) error {
	if req.Kind == engine.KindConcurrency && req.Op != engine.LeaseAcquire {
		return nil // a release or renew has no limit to override or shadow
	}
	if o := p.overrides.Load().Lookup(key); o != nil {
		next := *req
		next.Burst, next.Period = o.Burst, o.Period
		if req.Kind == engine.KindConcurrency {
			next.Period = req.Period // max only: the ttl is the holder's
		}
		if req.Kind == engine.KindFixedWindow || req.Kind == engine.KindSlidingWindow || req.Kind == engine.KindSlidingLog || req.Kind == engine.KindConcurrency {
			next.Rate = 0
		} else {
			next.Rate = o.Rate
		}
		err := next.Validate()
		if err == nil && req.Kind == engine.KindSlidingLog {
			max := opt.MaxLogLimit
			if max == 0 {
				max = engine.DefaultMaxLogLimit
			}
			if next.Burst > max {
				err = engine.ErrLogLimit
			}
		}
		if err != nil {
			return fmt.Errorf("limit-override %s: %w", rules.QuotePattern(o.Pattern), err)
		}
		*req = next
		p.overridden.Add(1)
	}
	if p.shadow.Load().Index(key) >= 0 {
		req.Shadow = true
		p.shadowed.Add(1)
	}
	return nil
}

// Stats are a node's counts of requests the rules changed (on the node
// that received them).
type Stats struct {
	Overrides, Shadows int    // rules in force
	Overridden         uint64 // requests whose parameters were replaced
	ShadowRequests     uint64 // requests sent as shadow
}

// Stats returns the rule counts and counters.
func (p *Policy) Stats() Stats {
	return Stats{Overrides: p.overrides.Load().Len(), Shadows: p.shadow.Load().Len(), Overridden: p.overridden.Load(), ShadowRequests: p.shadowed.Load()}
}

package rls

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// Writer executes keyspace operations: decide.Backend's Write, implemented
// by the standalone keyspace and by the cluster's replicated node. It must
// be safe for concurrent use, fill res[i] for ops[i], and return a non-nil
// error only when the ops may not have been applied.
type Writer interface {
	Write(ctx context.Context, ops []shards.Op, res []shards.Result) error
}

// Rules applies the operator's limit-override and limit-shadow to one
// limiter request on its key before it is decided: decide.Rules, the
// decision path's first stage, which every door applies where it builds
// its ops. An override replaces the request's parameters, a shadow
// pattern sets engine.Request.Shadow; an error refuses the request (an
// override that makes it invalid). It must be safe for concurrent use.
type Rules interface {
	ApplyRequest(key []byte, req *engine.Request) error
}

// errUndecided stands for the error of a descriptor left undecided without
// one (it cannot happen: every routed descriptor gets its group's answer).
var errUndecided = errors.New("rls: descriptor not decided")

// MaxDescriptors bounds the descriptors of one request; more are refused
// with InvalidArgument.
const MaxDescriptors = 1024

// Options configure a Service.
type Options struct {
	// Writer decides; required unless Router is set.
	Writer Writer
	// Router, on a cluster node, decides each descriptor in the group
	// that serves its key (Writer is then unused); nil: Writer decides
	// everything.
	Router Router
	// Rules, when set, rewrites each descriptor's request by the
	// operator's limit-override and limit-shadow before it is decided, as
	// every other door does; nil applies none.
	Rules Rules
	// Headers chooses the response headers (HeadersOff by default).
	Headers HeaderMode
	// NoGrow, when set, is asked before each decision: true marks the ops
	// NoGrow (the keyspace is over maxmemory under noeviction), so that a
	// request that would create a key is refused with ResourceExhausted.
	NoGrow func() bool
	// Logger receives reload messages; nil discards them.
	Logger *slog.Logger
	// StatsLimit bounds the domain and descriptor pairs counted on their
	// own (Stats.Descriptors); later ones count under Overflow. 0:
	// DefaultStatsLimit.
	StatsLimit int
	// Decided, when set, is told of each descriptor decided in the
	// keyspace (hits > 0): the limiter key it used and whether it was over
	// its limit (a shadow-mode one included). It feeds the server's heavy
	// hitters (LIMITER TOP, OBJECT FREQ). It is called on the request's
	// goroutine, so it must be cheap and safe for concurrent use; key is
	// only valid during the call.
	Decided func(key []byte, limited bool)
}

// Service answers envoy.service.ratelimit.v3.RateLimitService. The
// configuration is an immutable snapshot swapped atomically by Load and
// Reload, so a request in flight finishes with the configuration it
// started with. All methods are safe for concurrent use.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	router  Router
	rules   Rules // Options.Rules; nil: none
	noGrow  func() bool
	decided func(key []byte, limited bool) // Options.Decided; nil: none
	log     *slog.Logger

	cfg     atomic.Pointer[Config]
	headers atomic.Int32 // a HeaderMode

	mu       sync.Mutex // serialises loads
	dir      string     // guarded by mu
	seen     string     // guarded by mu: dir's fingerprint at the last load attempt
	settling string     // guarded by mu: a changed fingerprint the watcher saw at its last check
	dirValue atomic.Pointer[string]

	stats counters
	desc  *descStats
}

// counters are the service's running totals.
type counters struct {
	requests, overLimit, shadowOverLimit, errors, reloads, reloadErrors atomic.Int64
	forwarded, redirected, undecided                                    atomic.Int64
}

// Stats are a Service's totals since it was created.
type Stats struct {
	// Requests is the ShouldRateLimit calls answered (errors included).
	Requests int64
	// OverLimit is the calls answered OVER_LIMIT overall.
	OverLimit int64
	// ShadowOverLimit is the descriptors found over limit whose rule is in
	// shadow mode (answered OK).
	ShadowOverLimit int64
	// Errors is the calls answered with a gRPC error.
	Errors int64
	// Reloads and ReloadErrors count configuration loads that succeeded and
	// that were refused (the previous configuration kept).
	Reloads, ReloadErrors int64
	// Forwarded is the descriptors sent to be decided in another group than
	// this node's (each attempt counted); Redirected, the descriptors routed
	// again because the group asked did not serve their key (the slot moved
	// or migrates); Undecided, the descriptors that could not be decided:
	// answered UNKNOWN, or their call failed (see DESIGN.md).
	Forwarded, Redirected, Undecided int64
	// Descriptors are the per-descriptor counts, in the order the pairs
	// were first seen, the Overflow pair last (when it counted anything).
	Descriptors []DescriptorStats
	// StatsLimit is the most pairs counted on their own.
	StatsLimit int
}

// New returns a Service with an empty configuration (every descriptor
// answers OK) until Load.
func New(opt Options) *Service {
	s := &Service{router: opt.Router, rules: opt.Rules, noGrow: opt.NoGrow, decided: opt.Decided, log: opt.Logger, desc: newDescStats(opt.StatsLimit)}
	if s.router == nil {
		s.router = oneGroup{opt.Writer}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cfg.Store(newConfig())
	s.headers.Store(int32(opt.Headers))
	empty := ""
	s.dirValue.Store(&empty)
	return s
}

// Stats returns the running totals.
func (s *Service) Stats() Stats {
	c := &s.stats
	return Stats{
		Requests: c.requests.Load(), OverLimit: c.overLimit.Load(), ShadowOverLimit: c.shadowOverLimit.Load(),
		Errors: c.errors.Load(), Reloads: c.reloads.Load(), ReloadErrors: c.reloadErrors.Load(),
		Forwarded: c.forwarded.Load(), Redirected: c.redirected.Load(), Undecided: c.undecided.Load(),
		Descriptors: s.desc.all(), StatsLimit: s.desc.limit,
	}
}

// Dir returns the configuration directory ("" when none).
func (s *Service) Dir() string { return *s.dirValue.Load() }

// SetHeaders changes the response headers from the next request on.
func (s *Service) SetHeaders(m HeaderMode) { s.headers.Store(int32(m)) }

// Headers returns the response headers mode.
func (s *Service) Headers() HeaderMode { return HeaderMode(s.headers.Load()) }

// Load reads the configuration directory dir (see LoadDir) and makes it the
// one in force, and dir the directory Reload and Watch read. On any error
// nothing changes: the previous configuration and directory stay.
func (s *Service) Load(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked(dir)
}

// Reload reads the configuration directory again (SIGHUP). On error the
// previous configuration stays.
func (s *Service) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked(s.dir)
}

func (s *Service) loadLocked(dir string) error {
	fp := fingerprint(dir)
	c, err := LoadDir(dir)
	if err != nil {
		if dir == s.dir {
			s.seen = fp // a watcher retries only once the files change again
		}
		s.stats.reloadErrors.Add(1)
		s.log.Error("rate-limit service: configuration refused; the previous one stays", "dir", dir, "err", err)
		return err
	}
	s.cfg.Store(c)
	s.dir, s.seen = dir, fp
	s.dirValue.Store(&dir)
	s.stats.reloads.Add(1)
	if dir != "" { // no directory: no rules, nothing worth a line
		s.log.Info("rate-limit service: configuration loaded", "dir", dir, "files", len(c.Files), "domains", c.Domains())
	}
	return nil
}

// reloadIfChanged reloads when the directory's files changed since the last
// load attempt and then held still since the previous call (a file caught
// half-written may parse, cut short: it is loaded only once its name, size
// and modification time stop changing for a whole check interval). It
// reports whether it tried.
func (s *Service) reloadIfChanged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	fp := fingerprint(s.dir)
	if s.dir == "" || fp == s.seen {
		s.settling = ""
		return false
	}
	if fp != s.settling {
		s.settling = fp // changed since the last check: wait for it to hold still
		return false
	}
	s.settling = ""
	_ = s.loadLocked(s.dir) // logged
	return true
}

// plan is one descriptor's part in a decision.
type plan struct {
	limit  *Limit
	shared []string
	hits   int64
	// keyed: decided in the keyspace, by req on key. together: an enforced
	// descriptor, decided in one op with the other enforced descriptors of
	// its group (unless alone: the group's slot migrates, see
	// decideRouted).
	keyed, together, alone bool
	key                    []byte
	req                    engine.Request
	// askTo names the group to ask with Asking set after an ASK.
	askTo string
	// decided, result: the keyspace's answer; err: why the descriptor is
	// not decided (yet).
	decided bool
	result  engine.Result
	err     error
	reset   int64 // ns until it is fully replenished (or allows again), set by respond
}

// ShouldRateLimit decides every descriptor of req (see DESIGN.md): the
// enforced descriptors of one group together and atomically (all consume or
// none does), shadow-mode, quota-mode and refund descriptors each on its
// own, in one Write per group. Errors: InvalidArgument for an empty domain,
// no descriptors, more than MaxDescriptors, a hits_addend above 2^40 or an
// invalid limit override; when a descriptor that is not in shadow mode
// cannot be decided and the others do not refuse the request already:
// Unavailable (no leader, no group serves its slot), ResourceExhausted
// over maxmemory, FailedPrecondition (another limiter kind on its key), the
// context's code when it ends.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	s.stats.requests.Add(1)
	resp, err := s.decide(ctx, req)
	if err != nil {
		s.stats.errors.Add(1)
		return nil, err
	}
	if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		s.stats.overLimit.Add(1)
	}
	return resp, nil
}

func (s *Service) decide(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	domain, descs := req.GetDomain(), req.GetDescriptors()
	switch {
	case domain == "":
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(descs) == 0:
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(descs) > MaxDescriptors:
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d per request", len(descs), MaxDescriptors)
	}
	cfg := s.cfg.Load()
	plans := make([]plan, len(descs))
	var replaced map[string]bool
	for i, d := range descs {
		p := &plans[i]
		var err error
		if p.hits, err = hitsAddend(req, d); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
		}
		if d.GetLimit() != nil {
			if p.limit, err = overrideLimit(d.GetLimit()); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: limit override: %v", i, err)
			}
		} else {
			m := cfg.lookup(domain, d.GetEntries())
			p.limit, p.shared = m.limit, m.shared
		}
		if p.limit != nil && len(p.limit.Replaces) > 0 {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			for _, r := range p.limit.Replaces {
				replaced[r] = true
			}
		}
	}
	if err := s.prepare(domain, descs, plans, replaced); err != nil {
		return nil, err
	}
	s.decideRouted(ctx, plans)
	return s.respond(domain, descs, plans)
}

// prepare gives each plan that is decided in the keyspace its key and
// request (keyed), and marks the enforced ones (together): those are decided
// in one OpLimitAll per group (an OpLimit when alone), each shadow-mode,
// quota-mode or refund descriptor in an OpLimit of its own. Replaced,
// unlimited and banned (requests_per_unit 0) limits take no op; replaced
// ones lose their limit. The operator's rules (Options.Rules) rewrite each
// keyed request last, so that what is decided, replicated and forwarded
// carries their parameters and shadow flag; a descriptor stays enforced
// (together) under limit-shadow: its shadow refusal is answered allowed
// by the keyspace and blocks nothing.
func (s *Service) prepare(domain string, descs []*rlpb.RateLimitDescriptor, plans []plan, replaced map[string]bool) error {
	for i := range plans {
		p := &plans[i]
		l := p.limit
		if l != nil && l.Name != "" && replaced[l.Name] {
			p.limit, l = nil, nil
		}
		if l == nil || l.Unlimited || l.RequestsPerUnit == 0 {
			continue
		}
		r := l.request(p.hits)
		if r.Quantity < 0 && l.Algorithm != GCRA {
			return status.Errorf(codes.InvalidArgument, "descriptor %d: is_negative_hits needs the gcra algorithm, not %s", i, l.Algorithm)
		}
		if err := r.Validate(); err != nil {
			return status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
		}
		p.key = appendKey(nil, l.Algorithm, domain, descs[i].GetEntries(), p.shared)
		if s.rules != nil {
			if err := s.rules.ApplyRequest(p.key, &r); err != nil {
				return status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
			}
		}
		p.keyed, p.req = true, r
		p.together = !l.ShadowMode && !l.QuotaMode && r.Quantity >= 0
	}
	return nil
}

// respond builds the reply from the plans' results. A descriptor left
// undecided answers UNKNOWN; unless it is in shadow mode (which never
// changes the answer) the reply stands only when the decided descriptors
// refuse the request anyway (OVER_LIMIT); otherwise the call fails with the
// descriptor's error, so that Envoy applies its failure mode instead of
// taking a partial decision for an OK.
func (s *Service) respond(domain string, descs []*rlpb.RateLimitDescriptor, plans []plan) (*pb.RateLimitResponse, error) {
	out := &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(plans))}
	var (
		undecided             error
		overLimit             bool
		quotaTotal, quotaOver int
		// The headers describe an enforced descriptor (a quota one only
		// when no enforced descriptor matched; never a shadow one, which
		// must stay invisible to clients): see headerPick.
		enforced, quota headerPick
	)
	enforced.init()
	quota.init()
	for i := range plans {
		p := &plans[i]
		l := p.limit
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		out.Statuses[i] = st
		switch {
		case l == nil:
			continue
		case l.Unlimited:
			st.LimitRemaining = math.MaxUint32
			s.countDescriptor(domain, descs[i], p, false, false, false)
			continue
		}
		st.CurrentLimit = &pb.RateLimitResponse_RateLimit{RequestsPerUnit: l.RequestsPerUnit, Unit: l.Unit, Name: l.Name}
		if p.keyed && !p.decided {
			st.Code = pb.RateLimitResponse_UNKNOWN
			s.stats.undecided.Add(1)
			if undecided == nil && !l.ShadowMode {
				undecided = cmp.Or(p.err, errUndecided)
			}
			continue
		}
		// shadowed: the operator's limit-shadow made the keyspace answer
		// a refusal allowed (engine.Result.Shadowed); it counts as a
		// shadow-mode rule's refusal and is invisible to the client.
		limited, shadowed, reset, retryAfter := false, false, l.Period, int64(-1)
		if p.keyed {
			r := &p.result
			limited, shadowed = r.Limited || r.Shadowed, r.Shadowed
			st.LimitRemaining = uint32(min(max(r.Remaining, 0), math.MaxUint32))
			reset = r.ResetAfter
			if limited && r.RetryAfter >= 0 {
				reset, retryAfter = r.RetryAfter, r.RetryAfter
			}
		} else { // requests_per_unit 0: nothing is ever allowed
			limited = p.hits > 0
		}
		p.reset = reset
		st.DurationUntilReset = durationpb.New(time.Duration(engine.CeilMillis(reset)) * time.Millisecond)
		if limited {
			st.Code = pb.RateLimitResponse_OVER_LIMIT
		}
		s.countDescriptor(domain, descs[i], p, limited, shadowed, limited || !p.keyed || p.result.Remaining*100 <= p.result.Limit*NearLimitPercent)
		switch {
		case shadowed || limited && l.ShadowMode && !l.QuotaMode:
			st.Code = pb.RateLimitResponse_OK
			s.stats.shadowOverLimit.Add(1)
			limited = false // for the headers: a shadow refusal stays invisible
		case limited && !l.QuotaMode:
			overLimit = true
		}
		if l.QuotaMode {
			quotaTotal++
			if limited {
				quotaOver++
			}
		}
		switch {
		case l.QuotaMode:
			quota.add(i, limited, st.LimitRemaining, retryAfter)
		case !l.ShadowMode:
			enforced.add(i, limited, st.LimitRemaining, retryAfter)
		}
	}
	out.OverallCode = pb.RateLimitResponse_OK
	if undecided != nil && !overLimit {
		return nil, writeError(undecided)
	}
	if overLimit || (quotaTotal > 0 && quotaOver == quotaTotal) {
		out.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	hp := &enforced
	if hp.pick < 0 || (!overLimit && out.OverallCode == pb.RateLimitResponse_OVER_LIMIT) {
		hp = &quota // no enforced descriptor, or the quota ones decided
	}
	if mode := s.Headers(); mode != HeadersOff && hp.pick >= 0 {
		l := plans[hp.pick].limit
		retry := int64(-1)
		if out.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			retry = hp.retry
		}
		out.ResponseHeadersToAdd = appendHeaders(nil, mode, headerValues{
			name: l.Name, limit: int64(l.RequestsPerUnit), remaining: int64(hp.remaining),
			policy: l.policyItem(), reset: plans[hp.pick].reset, retry: retry,
		})
	}
	return out, nil
}

// countDescriptor adds a decided descriptor to its domain and descriptor's
// statistics; near: an allowed decision left at most NearLimitPercent of
// the limit remaining; shadowed: limited under the operator's
// limit-shadow (counted as a shadow-mode rule's refusal). Refunds and
// peeks (hits ≤ 0) are not hits.
func (s *Service) countDescriptor(domain string, d *rlpb.RateLimitDescriptor, p *plan, limited, shadowed, near bool) {
	if p.hits <= 0 {
		return
	}
	if s.decided != nil && p.keyed {
		s.decided(p.key, limited)
	}
	key := p.limit.statsKey
	if key == "" { // a limit sent with the descriptor
		key = statsKey(domain, descriptorPath(d.GetEntries()))
	}
	s.desc.get(key).count(p.hits, limited, shadowed || p.limit.ShadowMode, near)
}

// headerPick chooses, among one class of descriptors, the one the response
// headers describe — a limited one first, then the one with the least
// remaining — and the Retry-After of the class: the longest wait among its
// limited descriptors (all of them must allow the request again), or -1
// when one of them never will.
type headerPick struct {
	pick      int
	limited   bool
	remaining uint32
	retry     int64
	never     bool
}

func (h *headerPick) init() { *h = headerPick{pick: -1, remaining: math.MaxUint32, retry: -1} }

func (h *headerPick) add(i int, limited bool, remaining uint32, retryAfter int64) {
	if limited {
		if retryAfter < 0 {
			h.never = true
		}
		h.retry = max(h.retry, retryAfter)
		if h.never {
			h.retry = -1
		}
	}
	if h.pick < 0 || (limited && !h.limited) || (limited == h.limited && remaining < h.remaining) {
		h.pick, h.limited, h.remaining = i, limited, remaining
	}
}

// hitsAddend returns what descriptor d takes: its own hits_addend when set
// (0 allowed: it then only looks), else the request's, where 0 means 1.
// is_negative_hits makes it a refund. Above engine.MaxCount is an error.
func hitsAddend(req *pb.RateLimitRequest, d *rlpb.RateLimitDescriptor) (int64, error) {
	var h uint64
	if v := d.GetHitsAddend(); v != nil {
		h = v.GetValue()
	} else {
		h = max(uint64(req.GetHitsAddend()), 1)
	}
	if h > uint64(engine.MaxCount) {
		return 0, fmt.Errorf("hits_addend %d exceeds the largest allowed, 2^40 (%d)", h, engine.MaxCount)
	}
	if d.GetIsNegativeHits() {
		return -int64(h), nil
	}
	return int64(h), nil
}

// overrideLimit converts a limit sent by Envoy with the descriptor: a GCRA
// limit of requests_per_unit per unit × unit_multiplier, without shadow mode.
func overrideLimit(o *rlpb.RateLimitDescriptor_RateLimitOverride) (*Limit, error) {
	unit := pb.RateLimitResponse_RateLimit_Unit(o.GetUnit())
	secs, ok := unitSeconds[unit]
	if !ok {
		return nil, fmt.Errorf("invalid unit %v", o.GetUnit())
	}
	mult := int64(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
		mult = int64(m.GetValue())
	}
	// Checked before multiplying: a large multiplier would wrap around.
	if mult > engine.MaxPeriod/(secs*1e9) {
		return nil, fmt.Errorf("period of %d %s exceeds 3660 days", mult, unit)
	}
	l := &Limit{
		RequestsPerUnit: o.GetRequestsPerUnit(), Unit: unit, Algorithm: GCRA,
		Period: secs * mult * 1e9, Burst: max(int64(o.GetRequestsPerUnit()), 1),
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return l, nil
}

// appendKey appends the keyspace key of a descriptor to b:
//
//	rls:<algorithm>:<domain>_<key>_<value>_<key>_<value>...
//
// the layout of envoyproxy/ratelimit's cache key without its time bucket,
// with the algorithm in front (a key holds one limiter kind). Each field
// escapes '%' as %25 and '_' as %5F, so distinct descriptors never share a
// key. shared[i], when set, replaces entry i's value (share_threshold).
func appendKey(b []byte, a Algorithm, domain string, es []*rlpb.RateLimitDescriptor_Entry, shared []string) []byte {
	b = append(b, "rls:"...)
	b = append(b, a.String()...)
	b = append(b, ':')
	b = appendField(b, domain)
	for i, e := range es {
		b = append(b, '_')
		b = appendField(b, e.GetKey())
		b = append(b, '_')
		if i < len(shared) && shared[i] != "" {
			b = appendField(b, shared[i])
		} else {
			b = appendField(b, e.GetValue())
		}
	}
	return b
}

func appendField(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b = append(b, "%25"...)
		case '_':
			b = append(b, "%5F"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// writeError maps a keyspace failure to a gRPC status.
func writeError(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, shards.ErrWouldGrow):
		return status.Error(codes.ResourceExhausted, "rate limit keyspace over maxmemory: "+err.Error())
	case errors.Is(err, shards.ErrWrongType):
		return status.Error(codes.FailedPrecondition, "a rate limit key holds another kind of limiter: "+err.Error())
	}
	return status.Error(codes.Unavailable, "rate limit decision failed: "+err.Error())
}

var _ pb.RateLimitServiceServer = (*Service)(nil)

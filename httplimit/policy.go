package httplimit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/internal/ratepolicy"
)

// Algorithm selects the cellserver command a Policy is decided with.
type Algorithm int

// The algorithms, one per cellserver limiter command. The zero value is GCRA.
const (
	// GCRA is CL.THROTTLE (redis-cell's command): Burst+1 requests at once,
	// Count per Period sustained. Period must be whole seconds.
	GCRA Algorithm = iota
	// TokenBucket is TB.TAKE: a bucket of Burst tokens refilled
	// continuously with Count tokens per Period.
	TokenBucket
	// TokenBucketInterval is TB.TAKE … INTERVAL: a bucket of Burst tokens
	// that receives Count tokens at once at the end of each Period.
	TokenBucketInterval
	// LeakyBucket is LB.ADD: a queue of Burst requests draining Count per
	// Period.
	LeakyBucket
	// FixedWindow is FW.INCR: Count requests per window of Period, windows
	// aligned to the Unix epoch. Burst must be 0.
	FixedWindow
	// SlidingWindow is SW.INCR: Count requests per Period, estimated from
	// the current and previous windows. Burst must be 0.
	SlidingWindow
	// SlidingLog is SL.ADD: exactly Count requests in any Period (the
	// server bounds Count by its sl-max-limit). Burst must be 0.
	SlidingLog
)

// String returns the algorithm's name, as in cellserver's TYPE reply
// (gcra, token-bucket, …).
func (a Algorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case TokenBucket:
		return "token-bucket"
	case TokenBucketInterval:
		return "token-bucket-interval"
	case LeakyBucket:
		return "leaky-bucket"
	case FixedWindow:
		return "fixed-window"
	case SlidingWindow:
		return "sliding-window"
	case SlidingLog:
		return "sliding-log"
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// Bounds of the server's commands (docs/commands.md).
const (
	// MaxCount bounds Burst, Count and a request's quantity: 2^40.
	MaxCount = 1 << 40
	// MaxQuantity is the largest quantity one request may take.
	MaxQuantity = MaxCount
	// MaxPeriod is the longest Period: 3660 days.
	MaxPeriod = 3660 * 24 * time.Hour
	// maxNameLen bounds a policy name.
	maxNameLen = 64
	// maxSFInteger is the largest Integer a structured field can carry
	// (RFC 9651: at most 15 digits).
	maxSFInteger = ratepolicy.MaxInteger
)

// Policy is one limit applied to every request the middleware sees, per
// key. The zero Algorithm is GCRA.
//
// What Burst, Count and Period mean depends on the algorithm:
//
//	Algorithm            command           Burst            Count            Period
//	GCRA                 CL.THROTTLE       max_burst        count_per_period period (whole seconds)
//	TokenBucket          TB.TAKE           capacity (>= 1)  refill_tokens    refill_period
//	TokenBucketInterval  TB.TAKE INTERVAL  capacity (>= 1)  refill_tokens    refill_period
//	LeakyBucket          LB.ADD            capacity (>= 1)  leak_count       leak_period
//	FixedWindow          FW.INCR           0                limit            window
//	SlidingWindow        SW.INCR           0                limit            window
//	SlidingLog           SL.ADD            0                limit            window
//
// Burst is 0 up to MaxCount, Count 1 up to MaxCount, and Period 1 ms (1 s
// for GCRA) up to MaxPeriod, in whole milliseconds (whole seconds for
// GCRA).
type Policy struct {
	// Name identifies the policy in the RateLimit and RateLimit-Policy
	// fields and in the server's key: 1 to 64 ASCII letters, digits, '-',
	// '_' or '.', unique among a limiter's policies.
	Name string
	// Algorithm is the limiter command; GCRA when zero.
	Algorithm Algorithm
	// Burst is the GCRA max_burst, or a bucket's capacity; 0 for windows.
	Burst int64
	// Count is the requests (units) per Period.
	Count int64
	// Period is the GCRA period, a bucket's refill or leak period, or a
	// window's length.
	Period time.Duration
}

// compiled is a validated policy with its command and its RateLimit-Policy
// item, both computed once.
type compiled struct {
	Policy
	cmd    string        // the command's name
	params []any         // the arguments between key and quantity
	suffix []any         // the arguments after quantity
	unit   time.Duration // the reply's unit of time
	quota  int64         // q: the reply's limit
	window int64         // w: seconds, >= 1
	item   string        // "name";q=…;w=…
}

// compile validates p and derives its command and header item.
func compile(p Policy) (compiled, error) {
	if err := checkName(p.Name); err != nil {
		return compiled{}, err
	}
	bad := func(format string, args ...any) (compiled, error) {
		return compiled{}, fmt.Errorf("%w: %q: %s", ErrInvalidPolicy, p.Name, fmt.Sprintf(format, args...))
	}
	if p.Burst < 0 || p.Burst > MaxCount {
		return bad("burst %d out of range 0 to 2^40", p.Burst)
	}
	if p.Count < 1 || p.Count > MaxCount {
		return bad("count %d out of range 1 to 2^40", p.Count)
	}
	if p.Period <= 0 || p.Period > MaxPeriod {
		return bad("period %v out of range (0, 3660 days]", p.Period)
	}
	if p.Period%time.Millisecond != 0 {
		return bad("period %v is not a whole number of milliseconds", p.Period)
	}
	c := compiled{Policy: p, unit: time.Millisecond}
	ms := strconv.FormatInt(p.Period.Milliseconds(), 10) + "ms"
	var item ratepolicy.Item // q and w, derived as rls derives them
	switch p.Algorithm {
	case GCRA:
		if p.Period%time.Second != 0 {
			return bad("period %v is not a whole number of seconds (CL.THROTTLE)", p.Period)
		}
		c.cmd, c.unit = "CL.THROTTLE", time.Second
		c.params = []any{p.Burst, p.Count, int64(p.Period / time.Second)}
		item = ratepolicy.Bucket(p.Burst+1, p.Count, p.Period)
	case TokenBucket, TokenBucketInterval, LeakyBucket:
		if p.Burst < 1 {
			return bad("%v needs a capacity (Burst) of at least 1", p.Algorithm)
		}
		c.cmd = "TB.TAKE"
		if p.Algorithm == LeakyBucket {
			c.cmd = "LB.ADD"
		}
		c.params = []any{p.Burst, p.Count, ms}
		item = ratepolicy.Bucket(p.Burst, p.Count, p.Period)
		if p.Algorithm == TokenBucketInterval {
			c.suffix = []any{"INTERVAL"}
			item = ratepolicy.Interval(p.Burst, p.Count, p.Period)
		}
	case FixedWindow, SlidingWindow, SlidingLog:
		if p.Burst != 0 {
			return bad("%v takes no Burst (got %d)", p.Algorithm, p.Burst)
		}
		c.cmd = map[Algorithm]string{FixedWindow: "FW.INCR", SlidingWindow: "SW.INCR", SlidingLog: "SL.ADD"}[p.Algorithm]
		c.params = []any{p.Count, ms}
		item = ratepolicy.Window(p.Count, p.Period)
	default:
		return bad("unknown algorithm %v", p.Algorithm)
	}
	c.quota, c.window = item.Q, item.W
	c.item = fmt.Sprintf("%q;q=%d;w=%d", p.Name, c.quota, c.window)
	return c, nil
}

// checkName reports whether name is a valid policy name. The allowed
// characters need no escaping in a structured-field String and hold no
// brace, so that keys keep their hash tag.
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w: name %q must be 1 to %d characters", ErrInvalidPolicy, name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_' || b == '.') {
			return fmt.Errorf("%w: name %q: only ASCII letters, digits, '-', '_' and '.' are allowed", ErrInvalidPolicy, name)
		}
	}
	return nil
}

// compileAll validates a limiter's policies: at least one, unique names,
// and only GCRA when there are several (CL.THROTTLEALL decides several
// limits atomically, and only GCRA ones).
func compileAll(policies []Policy) ([]compiled, error) {
	if len(policies) == 0 {
		return nil, fmt.Errorf("%w: no policy", ErrInvalidPolicy)
	}
	out := make([]compiled, 0, len(policies))
	seen := make(map[string]bool, len(policies))
	for _, p := range policies {
		c, err := compile(p)
		if err != nil {
			return nil, err
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("%w: name %q used twice", ErrInvalidPolicy, p.Name)
		}
		seen[p.Name] = true
		if len(policies) > 1 && p.Algorithm != GCRA {
			return nil, fmt.Errorf("%w: %q: several policies are decided in one atomic CL.THROTTLEALL, which takes GCRA policies only (got %v)", ErrInvalidPolicy, p.Name, p.Algorithm)
		}
		out = append(out, c)
	}
	return out, nil
}

package outlimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/internal/setting"
)

// Limit is one client class's client-output-buffer-limit.
type Limit struct {
	// Hard closes the client as soon as more than Hard bytes are pending
	// for it (0: no hard limit).
	Hard int64
	// Soft closes the client when more than Soft bytes stay pending for
	// longer than SoftSeconds (0 in either: no soft limit).
	Soft        int64
	SoftSeconds int64
}

// Limits is the client-output-buffer-limit setting, in Redis's three
// classes. Only Normal applies: cellserver has no replica (its cluster
// replicates over raft) and no pub/sub clients, so Replica and PubSub are
// accepted and reported by CONFIG GET for compatibility, and ignored.
type Limits struct {
	Normal, Replica, PubSub Limit
}

// Default returns the default: normal clients 64mb hard, 16mb
// soft for 60 s (Redis's default for normal clients is no limit, but a
// limiter's replies are tens of bytes and the only large ones are
// administrative, so a bound costs nothing legitimate and keeps one client
// from holding unbounded memory); the other classes have Redis's defaults.
func Default() Limits {
	return Limits{
		Normal:  Limit{Hard: 64 << 20, Soft: 16 << 20, SoftSeconds: 60},
		Replica: Limit{Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
		PubSub:  Limit{Hard: 32 << 20, Soft: 8 << 20, SoftSeconds: 60},
	}
}

// Parse reads a client-output-buffer-limit value, one or more
// groups of "<class> <hard> <soft> <soft-seconds>" (class normal, replica
// (or slave) or pubsub; sizes in bytes with redis.conf units such as 64mb),
// over base: classes not named keep base's values, as in Redis.
func Parse(s string, base Limits) (Limits, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f)%4 != 0 {
		return base, errors.New("Wrong number of arguments in buffer limit configuration.")
	}
	out := base
	for i := 0; i < len(f); i += 4 {
		var l *Limit
		switch strings.ToLower(f[i]) {
		case "normal":
			l = &out.Normal
		case "replica", "slave":
			l = &out.Replica
		case "pubsub":
			l = &out.PubSub
		default:
			return base, errors.New("Invalid client class specified in buffer limit configuration.")
		}
		hard, err1 := setting.ParseBytes(f[i+1])
		soft, err2 := setting.ParseBytes(f[i+2])
		secs, err3 := strconv.ParseInt(f[i+3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || hard < 0 || soft < 0 || secs < 0 || secs > 1<<31 {
			return base, errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
		}
		*l = Limit{Hard: hard, Soft: soft, SoftSeconds: secs}
	}
	return out, nil
}

// String formats the setting as Redis's CONFIG GET does, in bytes:
// "normal 67108864 16777216 60 slave 268435456 67108864 60 pubsub ...".
func (l Limits) String() string {
	return fmt.Sprintf("normal %d %d %d slave %d %d %d pubsub %d %d %d",
		l.Normal.Hard, l.Normal.Soft, l.Normal.SoftSeconds,
		l.Replica.Hard, l.Replica.Soft, l.Replica.SoftSeconds,
		l.PubSub.Hard, l.PubSub.Soft, l.PubSub.SoftSeconds)
}

// SoftDeadline follows pending bytes (a client's unwritten replies)
// against the soft limit at now: while they pass it, *since is when they
// first did (set now if zero) and the result is when the soft seconds run
// out from then; otherwise *since is reset and the result is zero.
func (l Limit) SoftDeadline(pending int64, since *time.Time, now time.Time) time.Time {
	if l.Soft <= 0 || l.SoftSeconds <= 0 || pending <= l.Soft {
		*since = time.Time{}
		return time.Time{}
	}
	if since.IsZero() {
		*since = now
	}
	return since.Add(time.Duration(l.SoftSeconds) * time.Second)
}

// Check compares pending bytes with l at now, following the soft limit's
// time in *since (SoftDeadline): it returns which limit closes the client
// ("hard", "soft" once the soft seconds have run out, "" none) and
// whether the pending bytes are past the soft limit.
func (l Limit) Check(pending int64, since *time.Time, now time.Time) (which string, overSoft bool) {
	if l.Hard > 0 && pending > l.Hard {
		return "hard", pending > l.Soft
	}
	dl := l.SoftDeadline(pending, since, now)
	if !dl.IsZero() && now.After(dl) {
		return "soft", true
	}
	return "", !dl.IsZero()
}

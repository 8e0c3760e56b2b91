package ratepolicy

import (
	"math/big"
	"time"
)

// MaxInteger is the largest Integer a structured field can carry (RFC 9651:
// at most 15 digits); q and w are clamped to it.
const MaxInteger = 999_999_999_999_999

// Item is a policy's quota and window.
type Item struct {
	// Q is the quota, in requests: 0 or more.
	Q int64
	// W is the window, in whole seconds rounded up: 1 or more.
	W int64
}

// Bucket is a limiter that admits capacity requests at once and refills
// continuously at count per period (GCRA with capacity max_burst+1, a
// token bucket, a leaky bucket): q = capacity, w = ⌈capacity × period /
// count⌉ s. A count of 0 (a limit that admits nothing, such as an Envoy
// rule of requests_per_unit 0) gives q = 0 and w = period.
func Bucket(capacity, count int64, period time.Duration) Item {
	if count <= 0 {
		return Window(0, period)
	}
	return Item{Q: clamp(capacity), W: seconds(big.NewInt(capacity), period, count)}
}

// Interval is a bucket of capacity that receives count tokens at once at
// the end of each period (TB.TAKE … INTERVAL): q = capacity, w = ⌈capacity
// / count⌉ × period, rounded up to seconds.
func Interval(capacity, count int64, period time.Duration) Item {
	if count <= 0 {
		return Window(0, period)
	}
	refills := capacity / count
	if capacity%count != 0 {
		refills++
	}
	return Item{Q: clamp(capacity), W: seconds(big.NewInt(refills), period, 1)}
}

// Window is a limiter of count requests per window (fixed window, sliding
// window, sliding log): q = count, w = the window in seconds, rounded up.
func Window(count int64, window time.Duration) Item {
	return Item{Q: clamp(count), W: seconds(big.NewInt(1), window, 1)}
}

// seconds returns ⌈n × period / count⌉ in whole seconds, at least 1 and
// at most MaxInteger. count is positive.
func seconds(n *big.Int, period time.Duration, count int64) int64 {
	num := new(big.Int).Mul(n, big.NewInt(int64(period)))
	den := new(big.Int).Mul(big.NewInt(count), big.NewInt(int64(time.Second)))
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	switch {
	case !q.IsInt64() || q.Int64() > MaxInteger:
		return MaxInteger
	case q.Int64() < 1:
		return 1
	}
	return q.Int64()
}

func clamp(n int64) int64 { return max(0, min(n, MaxInteger)) }

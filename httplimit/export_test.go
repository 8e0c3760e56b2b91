package httplimit

import "time"

// WithClock gives the circuit breaker and the deny cache a fake clock.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

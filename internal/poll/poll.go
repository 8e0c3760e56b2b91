package poll

import (
	"testing"
	"time"
)

const (
	firstInterval = 2 * time.Millisecond
	maxInterval   = 50 * time.Millisecond
)

// Until calls cond until it returns nil. Between calls it waits a few
// milliseconds, doubling the wait up to 50 ms. If cond has not returned nil
// once timeout has passed, Until fails the test with cond's last error
// (t.Fatalf, so it must be called from the test's goroutine).
func Until(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
			return
		}
		time.Sleep(interval) // polling interval, not synchronisation
		interval = min(interval*2, maxInterval)
	}
}

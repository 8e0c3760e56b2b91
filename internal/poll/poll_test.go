package poll

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}

func TestUntilReturnsOnceConditionHolds(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	Until(r, 5*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if r.failed {
		t.Fatalf("Until failed: %s", r.msg)
	}
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

func TestUntilFailsWithLastError(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	Until(r, 30*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("attempt %d", calls)
	})
	if !r.failed {
		t.Fatal("Until did not fail although the condition never held")
	}
	if want := fmt.Sprintf("attempt %d", calls); !strings.Contains(r.msg, want) {
		t.Errorf("failure message = %q, want it to contain the last error %q", r.msg, want)
	}
	if calls < 2 {
		t.Errorf("cond called %d times, want it polled more than once", calls)
	}
}

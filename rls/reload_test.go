package rls

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

func limitFile(rpu int) string {
	return fmt.Sprintf("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", rpu)
}

// currentLimit returns the requests_per_unit the service answers for k=v.
func (h *harness) currentLimit(t testing.TB) uint32 {
	t.Helper()
	return h.call(t, request("d", desc("k", "v"))).Statuses[0].CurrentLimit.GetRequestsPerUnit()
}

// TestReload: a good directory replaces the limits; a bad one is refused
// with its error and the previous configuration stays.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "d.yaml", limitFile(5))
	h := newHarness(t, dir, Options{})
	if got := h.currentLimit(t); got != 5 {
		t.Fatalf("limit = %d, want 5", got)
	}
	writeFile(t, dir, "d.yaml", limitFile(7))
	if err := h.svc.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := h.currentLimit(t); got != 7 {
		t.Fatalf("limit after reload = %d, want 7", got)
	}
	writeFile(t, dir, "d.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: eon, requests_per_unit: 1}\n")
	if err := h.svc.Reload(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Reload of a bad file = %v, want ErrConfig", err)
	}
	if got := h.currentLimit(t); got != 7 {
		t.Fatalf("limit after a refused reload = %d, want 7 (kept)", got)
	}
	// Load of another directory: refused when bad, the directory kept.
	if err := h.svc.Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Load of a missing directory = nil")
	}
	if h.svc.Dir() != dir {
		t.Errorf("Dir after a refused Load = %q, want %q", h.svc.Dir(), dir)
	}
	other := t.TempDir()
	writeFile(t, other, "x.yaml", limitFile(9))
	if err := h.svc.Load(other); err != nil {
		t.Fatal(err)
	}
	if got := h.currentLimit(t); got != 9 || h.svc.Dir() != other {
		t.Errorf("after Load(other): limit %d dir %q, want 9 and %q", got, h.svc.Dir(), other)
	}
	if s := h.svc.Stats(); s.Reloads != 3 || s.ReloadErrors != 2 {
		t.Errorf("Stats = %+v; want 3 reloads (first load included), 2 errors", s)
	}
}

// TestWatch: a file change is picked up by the watcher; a bad change is
// refused and the previous configuration keeps answering.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "d.yaml", limitFile(5))
	h := newHarness(t, dir, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { h.svc.Watch(ctx, 10*time.Millisecond) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	writeFile(t, dir, "d.yaml", limitFile(11)+"# a different size\n")
	poll.Until(t, 30*time.Second, func() error {
		if got := h.currentLimit(t); got != 11 {
			return fmt.Errorf("limit = %d, want 11", got)
		}
		return nil
	})
	writeFile(t, dir, "e.yaml", "domain: d\n") // duplicate domain: refused
	poll.Until(t, 30*time.Second, func() error {
		if h.svc.Stats().ReloadErrors == 0 {
			return errors.New("the bad file was not tried")
		}
		return nil
	})
	if got := h.currentLimit(t); got != 11 {
		t.Fatalf("limit after a refused change = %d, want 11", got)
	}
	if err := os.Remove(filepath.Join(dir, "e.yaml")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if s := h.svc.Stats(); s.Reloads < 3 {
			return fmt.Errorf("reloads = %d, want 3", s.Reloads)
		}
		return nil
	})
}

// TestReloadUnderLoad: requests in flight during reloads all succeed, each
// with one of the two configurations.
func TestReloadUnderLoad(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	writeFile(t, dirA, "d.yaml", limitFile(1000))
	writeFile(t, dirB, "d.yaml", limitFile(2000))
	h := newHarness(t, dirA, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, err := h.client.ShouldRateLimit(ctx, request("d", desc("k", fmt.Sprint(w))))
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if got := r.Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 1000 && got != 2000 {
					errs <- fmt.Errorf("limit %d, want 1000 or 2000", got)
					return
				}
			}
		})
	}
	for i := 0; i < 50; i++ {
		dir := dirA
		if i%2 == 0 {
			dir = dirB
		}
		if err := h.svc.Load(dir); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

package shards

import (
	"context"
	"time"
)

// Active expiry. Keys expire lazily when touched; Sweep reclaims the rest.
// Each shard keeps a position in its record slab; Sweep visits the shards
// round-robin, examining at most reclaimChunk records per lock hold, so no
// lock is ever held for a scan of a whole shard.

const (
	// sweepExamineFactor bounds the records one Sweep call examines: budget
	// × sweepExamineFactor (a pass that finds little expired stops early).
	sweepExamineFactor = 16
	// sweepBudget is how many keys one sweeper step reclaims at most.
	sweepBudget = 2048
	// sweepMaxShare is the share of each tick the sweeper may spend
	// repeating steps while they keep finding many expired keys.
	sweepMaxShare = 4 // 1/4 of the tick, as Redis's active expiry cycle
)

// Sweep reclaims up to budget keys expired at now, across the shards,
// continuing where the previous call stopped. It examines at most
// budget × 16 records in total and at most 1024 under one lock hold, and
// returns how many it reclaimed. Concurrent calls do not queue: a call made
// while another runs returns 0.
func (s *Store) Sweep(now int64, budget int) int {
	n, _ := s.sweep(now, budget)
	return n
}

func (s *Store) sweep(now int64, budget int) (reclaimed, examined int) {
	if budget <= 0 {
		return 0, 0
	}
	select {
	case s.sweepMu <- struct{}{}:
	default:
		return 0, 0
	}
	defer func() { <-s.sweepMu }()

	maxExamine := budget * sweepExamineFactor
	// Visit each shard at most once per full round, plus the one we started in.
	for visited := 0; visited <= len(s.shards) && reclaimed < budget && examined < maxExamine; {
		sh := &s.shards[s.sweepNext&s.mask]
		sh.mu.Lock()
		n := min(reclaimChunk, maxExamine-examined)
		next, ex, del := sh.reclaim(sh.sweepPos, n, budget-reclaimed, now)
		examined += ex
		reclaimed += del
		atEnd := next >= len(sh.recs)
		sh.sweepPos = next
		if atEnd {
			sh.sweepPos = 0
		}
		if del > 0 {
			sh.maybeShrink() // a rebuild restarts this shard's pass at 0
		}
		sh.mu.Unlock()
		if atEnd {
			s.sweepNext++
			visited++
		}
	}
	return reclaimed, examined
}

// RunSweeper runs Sweep every tick until ctx is done, reading the instant
// from clock (Unix ns). Like Redis's active expiry cycle it is adaptive:
// within a tick it repeats while a step reclaims at least a quarter of what
// it examined, for at most a quarter of the tick. It returns when ctx is
// done.
func (s *Store) RunSweeper(ctx context.Context, clock func() int64, every time.Duration) {
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		for ctx.Err() == nil {
			n, ex := s.sweep(clock(), sweepBudget)
			if n == 0 || n*4 < ex || time.Since(start) > every/sweepMaxShare {
				break
			}
		}
	}
}

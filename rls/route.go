package rls

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// Router decides keyspace operations in the group of a cluster that serves
// their keys (see DESIGN.md, "Several groups"). A Service without one decides
// everything through its Writer. Implementations must be safe for
// concurrent use.
type Router interface {
	// Self names this node's group.
	Self() string
	// Route names the group that serves key's slot in this node's view of
	// the cluster (ok false when no group does) and, while that slot
	// migrates out of it, the group importing it (importer "" otherwise).
	Route(key []byte) (owner, importer string, ok bool)
	// WriteGroup is Writer.Write in the group named group: the ops go to
	// that group's leader, which decides them in one log entry. The group
	// decides at apply time whether it serves each op's keys; an op it
	// does not serve fails alone, res[i].Err wrapping cluster.ErrMoved,
	// cluster.ErrAsk or cluster.ErrTryAgain (or shards.ErrMoving), with
	// nothing applied. The error
	// is about the whole write, as Writer's (no leader within the bound,
	// outcome unknown, ctx's error).
	WriteGroup(ctx context.Context, group string, ops []shards.Op, res []shards.Result) error
}

// ErrNoGroup is a descriptor's error when no group serves its key's slot.
// (A group's per-operation refusals, that it does not serve the op's keys
// any longer, are cluster's: ErrMoved, ErrAsk, ErrTryAgain.)
var ErrNoGroup = errors.New("rls: no group serves the slot")

const (
	// maxRoutes bounds the attempts at one descriptor: the first and the
	// re-routes after a group refused it (the slot moved or migrates).
	maxRoutes = 8
	// routeBackoff and maxRouteBackoff pace re-routes that wait for this
	// node's view of the cluster to catch up (doubling, capped); the
	// gRPC call's deadline bounds them all.
	routeBackoff    = 10 * time.Millisecond
	maxRouteBackoff = 200 * time.Millisecond
)

// oneGroup is the Router of a keyspace that is not split: every key is
// decided through w.
type oneGroup struct{ w Writer }

func (oneGroup) Self() string                        { return "" }
func (oneGroup) Route([]byte) (string, string, bool) { return "", "", true }
func (o oneGroup) WriteGroup(ctx context.Context, _ string, ops []shards.Op, res []shards.Result) error {
	return o.w.Write(ctx, ops, res)
}

// groupBatch is what one group is asked in one round: its ops, and for each
// op the plans (descriptor indexes) it decides, in key order.
type groupBatch struct {
	group string
	ops   []shards.Op
	who   [][]int
	err   error
	res   []shards.Result
}

// decideRouted decides every keyed plan (see plan.keyed): each round routes
// the undecided ones to their groups, builds per group one op of the
// enforced descriptors (unless split) and one op for each other, and asks
// the groups at once. A plan the group refused because it does not serve
// its key is routed again (after ASK to the importing group, with Asking
// set), up to maxRoutes attempts and within ctx. A plan that is still
// undecided keeps its last error in err.
func (s *Service) decideRouted(ctx context.Context, plans []plan) {
	noGrow := s.noGrow != nil && s.noGrow()
	self := s.router.Self()
	var todo []int
	for i := range plans {
		if plans[i].keyed {
			todo = append(todo, i)
		}
	}
	backoff := routeBackoff
	for attempt := 1; len(todo) > 0; attempt++ {
		batches, unrouted := s.route(plans, todo, noGrow)
		for _, b := range batches {
			if b.group != self {
				for _, w := range b.who {
					s.stats.forwarded.Add(int64(len(w)))
				}
			}
		}
		s.write(ctx, batches)
		// A slot without an owner in this node's view is, but for an
		// operator's DELSLOTS, a handover the view has not followed yet.
		again, wait := unrouted, len(unrouted) > 0
		for _, b := range batches {
			for j, w := range b.who {
				r := &shards.Result{Err: b.err}
				if b.err == nil {
					r = &b.res[j]
				}
				retry, w8 := s.settle(plans, w, r, b.err != nil)
				if retry {
					again = append(again, w...)
					wait = wait || w8
				}
			}
		}
		if len(again) == 0 {
			return
		}
		if attempt == maxRoutes {
			return // the plans keep their last error
		}
		s.stats.redirected.Add(int64(len(again)))
		if wait {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, maxRouteBackoff)
		}
		todo = again
	}
}

// route groups the plans of todo by the group that decides them now: the
// owner of the key's slot, or the importing group after an ASK. The plans
// whose slot no group serves get ErrNoGroup and are returned apart.
func (s *Service) route(plans []plan, todo []int, noGrow bool) (batches []*groupBatch, unrouted []int) {
	byGroup := map[string]*groupBatch{}
	together := map[*groupBatch][]int{}
	for _, i := range todo {
		p := &plans[i]
		g := p.askTo
		if g == "" {
			owner, _, ok := s.router.Route(p.key)
			if !ok {
				p.err = ErrNoGroup
				unrouted = append(unrouted, i)
				continue
			}
			g = owner
		}
		b := byGroup[g]
		if b == nil {
			b = &groupBatch{group: g}
			byGroup[g] = b
			batches = append(batches, b)
		}
		if p.together && !p.alone && p.askTo == "" {
			together[b] = append(together[b], i)
			continue
		}
		b.ops = append(b.ops, shards.Op{Code: shards.OpLimit, Keys: [][]byte{p.key}, Reqs: []engine.Request{p.req}, NoGrow: noGrow, Asking: p.askTo != ""})
		b.who = append(b.who, []int{i})
	}
	for _, b := range batches {
		idx := together[b]
		if len(idx) == 0 {
			continue
		}
		op := shards.Op{Code: shards.OpLimitAll, NoGrow: noGrow}
		if len(idx) == 1 {
			op.Code = shards.OpLimit
		}
		for _, i := range idx {
			op.Keys = append(op.Keys, plans[i].key)
			op.Reqs = append(op.Reqs, plans[i].req)
		}
		b.ops = append(b.ops, op)
		b.who = append(b.who, idx)
	}
	return batches, unrouted
}

// write asks every group its batch, at once when there are several.
func (s *Service) write(ctx context.Context, batches []*groupBatch) {
	do := func(b *groupBatch) {
		if len(b.ops) == 0 {
			return
		}
		b.res = make([]shards.Result, len(b.ops))
		b.err = s.router.WriteGroup(ctx, b.group, b.ops, b.res)
	}
	if len(batches) == 1 {
		do(batches[0])
		return
	}
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Go(func() { do(b) })
	}
	wg.Wait()
}

// settle records the outcome of one op for the plans who it decided: a
// result, a final error, or a refusal to route again. It reports whether
// to route them again and whether to wait before (this node's view of the
// cluster must catch up) rather than follow a redirection at once.
func (s *Service) settle(plans []plan, who []int, r *shards.Result, whole bool) (retry, wait bool) {
	err := r.Err
	if err == nil {
		for j, i := range who {
			plans[i].decided, plans[i].result, plans[i].err = true, r.Results[j], nil
		}
		return false, false
	}
	for _, i := range who {
		plans[i].err = err
	}
	if whole {
		return false, false // the Router already waited for a leader
	}
	multi := len(who) > 1
	switch {
	case errors.Is(err, cluster.ErrMoved):
		// The slot is another group's now (or, after an ASK, the move
		// ended): route by owner again once this node's view follows.
		for _, i := range who {
			plans[i].askTo = ""
		}
		return true, true
	case errors.Is(err, cluster.ErrAsk):
		if multi {
			// Keys of several slots, one migrating: each is decided on
			// its own, wherever it is.
			split(plans, who)
			return true, false
		}
		p := &plans[who[0]]
		if _, importer, ok := s.router.Route(p.key); ok && importer != "" {
			p.askTo = importer
			return true, false
		}
		return true, true // this node's view does not name the importer yet
	case errors.Is(err, cluster.ErrTryAgain), errors.Is(err, shards.ErrMoving):
		if multi {
			split(plans, who)
			return true, false
		}
		return true, true
	}
	return false, false
}

// split marks plans to be decided by ops of their own from now on.
func split(plans []plan, who []int) {
	for _, i := range who {
		plans[i].alone = true
	}
}

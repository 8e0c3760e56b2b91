package httplimit

import (
	"context"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

// refusals ends the decisions in flight as soon as a dial of the client
// is refused. go-redis dials in the background and retries a refused
// dial (DialerRetries, 5 by default, 100 ms apart), so a decision waiting
// for a connection would otherwise learn nothing before its timeout. A
// dial hook added to the client reports each refused dial here; every
// decision then waiting is cancelled with the refusal as its cause, and
// the circuit breaker opens at once (classify sees the refusal). go-redis
// goes on with its retries in the background (they cannot be stopped from
// outside), but no request waits for them, and the open breaker starts no
// new dial until its probe.
//
// The client's nodes are one server to the limiter, as they are to the
// breaker: a refusal by any node ends every decision in flight. Safe for
// concurrent use.
type refusals struct {
	mu      sync.Mutex
	next    uint64                             // guarded by mu
	waiting map[uint64]context.CancelCauseFunc // guarded by mu
}

// watch registers a decision's cancel; the returned func unregisters it.
func (r *refusals) watch(cancel context.CancelCauseFunc) (unwatch func()) {
	r.mu.Lock()
	id := r.next
	r.next++
	if r.waiting == nil {
		r.waiting = make(map[uint64]context.CancelCauseFunc)
	}
	r.waiting[id] = cancel
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
	}
}

// refused cancels every decision in flight with err, a refused dial.
func (r *refusals) refused(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.waiting {
		cancel(err)
	}
}

// hook reports refused dials to r. It is a redis.Hook that changes
// nothing else.
func (r *refusals) hook() redis.Hook { return refusedDialHook{r} }

type refusedDialHook struct{ r *refusals }

func (h refusedDialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil && isRefused(err) {
			h.r.refused(err)
		}
		return c, err
	}
}

func (refusedDialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (refusedDialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// watchDials adds r's hook where client dials: to a *redis.ClusterClient's
// node clients (every node it creates from now on), to any other client
// itself.
func (r *refusals) watchDials(client redis.UniversalClient) {
	if c, ok := client.(*redis.ClusterClient); ok {
		c.OnNewNode(func(node *redis.Client) { node.AddHook(r.hook()) })
		return
	}
	client.AddHook(r.hook())
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// Addresses are names. A raft address in the configuration is kept as the
// node advertised it — a host name stays a name — and resolved at every
// dial, so that a member whose name now points elsewhere (a pod restarted
// with a new IP behind a stable DNS name) is found where it is.

// Resolver returns the addresses host (a name, never an IP literal) names
// now, tried in order. It is called on every dial to a name and must be
// safe for concurrent use.
type Resolver func(ctx context.Context, host string) ([]string, error)

// dialer opens TCP connections to host:port addresses, resolving names at
// dial time through resolve, and logs (rate-limited, per address) when an
// address cannot be reached or resolved. Safe for concurrent use.
type dialer struct {
	resolve Resolver
	log     *slog.Logger

	mu     sync.Mutex
	failed map[string]time.Time // last "cannot reach" line per address; guarded by mu
}

// unreachableLogEvery is the most often one address's "cannot reach" line
// is logged.
const unreachableLogEvery = 10 * time.Second

// maxUnreachableTracked is the size past which the failure times that no
// longer hold back a line are forgotten (addresses come from requests too).
const maxUnreachableTracked = 256

func newDialer(resolve Resolver, log *slog.Logger) *dialer {
	if resolve == nil {
		resolve = net.DefaultResolver.LookupHost
	}
	return &dialer{resolve: resolve, log: log, failed: map[string]time.Time{}}
}

// dial connects to addr (host:port), bounded by ctx. A host name is
// resolved now and each of its addresses tried in order until one
// connects. Errors name addr and what it resolved to.
func (d *dialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	targets, err := d.targets(ctx, addr)
	if err != nil {
		return nil, err
	}
	var nd net.Dialer
	var errs []error
	for _, t := range targets {
		c, err := nd.DialContext(ctx, "tcp", t)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	err = errors.Join(errs...)
	if len(targets) > 1 || targets[0] != addr {
		err = fmt.Errorf("%s (resolved to %s): %w", addr, strings.Join(targets, ", "), err)
	}
	return nil, err
}

// targets returns the host:port addresses to try for addr: addr itself
// when its host is an IP literal, otherwise one per resolved address.
func (d *dialer) targets(ctx context.Context, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) != nil {
		return []string{addr}, nil
	}
	ips, err := d.resolve(ctx, host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip, port)
	}
	return out, nil
}

// unreachable logs, at most once per unreachableLogEvery for each address,
// that addr, which what names (e.g. "a member's raft address"), could not
// be reached, and why.
func (d *dialer) unreachable(addr, what string, err error) {
	now := time.Now()
	d.mu.Lock()
	last, seen := d.failed[addr]
	if seen && now.Sub(last) < unreachableLogEvery {
		d.mu.Unlock()
		return
	}
	if len(d.failed) >= maxUnreachableTracked {
		for a, t := range d.failed {
			if now.Sub(t) >= unreachableLogEvery {
				delete(d.failed, a)
			}
		}
	}
	d.failed[addr] = now
	d.mu.Unlock()
	d.log.Warn(fmt.Sprintf("replication: cannot reach %s %s", what, addr), "addr", addr, "err", err)
}

// reached forgets addr's failures, so that the next one is logged at once.
func (d *dialer) reached(addr string) {
	d.mu.Lock()
	delete(d.failed, addr)
	d.mu.Unlock()
}

// nameAddr is an advertised address kept as written (a host name stays a
// name): what Addr returns to raft's transport, which records it in the
// configuration.
type nameAddr string

func (a nameAddr) Network() string { return "tcp" }
func (a nameAddr) String() string  { return string(a) }

// Command httplimit is an HTTP service behind cellserver rate limits, to
// copy from: every request is limited per client IP by two policies decided
// in one round trip, answered 429 with Retry-After and the RateLimit fields
// when over, and failed open (or closed, with --fail-closed) when cellserver
// does not answer within 100 ms. A client hammering its key past the limit
// is refused from the deny cache, without a round trip, for up to 1 s
// (--deny-cache).
//
//	go run ./examples/httplimit --listen 127.0.0.1:8080 --cellserver 127.0.0.1:6379
//	curl -i 127.0.0.1:8080/hello
//
// The Python (examples/python/app.py) and Node (examples/node/app.js)
// examples take the same command line and answer alike. It prints
// "listening on HOST:PORT" once it serves (--listen 127.0.0.1:0 picks a
// free port).
//
// --cellserver takes one address, or the nodes of one Raft group separated
// by commas: any node accepts every command, so the client dials them in
// turn until one answers. --cluster instead treats the addresses as a
// cluster of groups routed by hash slot (redis.ClusterClient).
//
// The limiter's counters (decisions, local, round_trips, errors: the deny
// cache's hit rate is local / decisions) are the expvar "limiter" at
// /debug/vars.
package main

import (
	"context"
	"errors"
	"expvar"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "httplimit:", err)
		os.Exit(1)
	}
}

func run() error {
	// 1. Flags.
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve HTTP on")
	servers := flag.String("cellserver", "127.0.0.1:6379", "cellserver address, or the comma-separated nodes of one Raft group")
	cluster := flag.Bool("cluster", false, "the addresses are a cluster of groups routed by hash slot")
	password := flag.String("password", "", "cellserver's requirepass")
	trusted := flag.String("trusted-proxies", "", "comma-separated prefixes (10.0.0.0/8) of proxies whose X-Forwarded-For is believed")
	failClosed := flag.Bool("fail-closed", false, "answer 503 when cellserver does not answer, instead of letting requests through")
	denyCache := flag.Duration("deny-cache", httplimit.DefaultDenyCacheMax, "longest a refusal is repeated without asking cellserver (0: off)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags are --listen, --cellserver, --fail-closed, …)", flag.Arg(0))
	}

	var proxies []netip.Prefix
	for _, s := range splitList(*trusted) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("--trusted-proxies: %w", err)
		}
		proxies = append(proxies, p)
	}
	addrs := splitList(*servers)
	if len(addrs) == 0 {
		return errors.New("--cellserver: no address")
	}

	// 2. The client. ContextTimeoutEnabled lets the limiter's timeout stop
	// the call itself. One dial attempt: while the server refuses
	// connections, the limiter's circuit breaker probes it once a second.
	var rdb redis.UniversalClient
	if *cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: *password, ContextTimeoutEnabled: true, DialerRetries: 1})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addrs[0], Dialer: dialAny(addrs), Password: *password, ContextTimeoutEnabled: true, DialerRetries: 1})
	}
	defer rdb.Close()

	// 3. The policies, the limiter and the middleware.
	policies := []httplimit.Policy{
		{Name: "burst", Burst: 19, Count: 10, Period: time.Second},         // 20 at once, 10 per second
		{Name: "daily", Burst: 9999, Count: 10000, Period: 24 * time.Hour}, // 10000 a day
	}
	limiter, err := httplimit.NewLimiter(rdb, policies, httplimit.WithDenyCache(*denyCache))
	if err != nil {
		return err
	}
	expvar.Publish("limiter", expvar.Func(func() any { return limiter.Stats() }))
	opts := []httplimit.Option{
		httplimit.WithLegacyHeaders(),
		httplimit.WithErrorHandler(func(r *http.Request, err error) {
			if errors.Is(err, httplimit.ErrCircuitOpen) {
				// Every request while the server is down: the failure
				// that opened the breaker was logged already.
				slog.Debug("rate limiter unavailable", "path", r.URL.Path, "err", err)
				return
			}
			slog.Warn("rate limiter unavailable", "path", r.URL.Path, "err", err)
		}),
	}
	if *failClosed {
		opts = append(opts, httplimit.WithFailClosed())
	}
	limit, err := limiter.Middleware(httplimit.ByIP(proxies...), opts...)
	if err != nil {
		return err
	}

	// 4. The service: /hello is limited, /debug/vars is not.
	api := http.NewServeMux()
	api.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})
	mux := http.NewServeMux()
	mux.Handle("/debug/vars", expvar.Handler())
	mux.Handle("/", limit(api))

	// 5. Serve until SIGINT or SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Println("listening on", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// dialAny dials the addresses in turn, starting from the last that
// answered: the nodes of one Raft group all accept every command.
func dialAny(addrs []string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	var last atomic.Int64
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		var errs []error
		start := int(last.Load())
		for i := range addrs {
			n := (start + i) % len(addrs)
			c, err := d.DialContext(ctx, network, addrs[n])
			if err == nil {
				last.Store(int64(n))
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

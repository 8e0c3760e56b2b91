package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPServer serves /metrics, the probes /healthz and /readyz (health.go)
// and a plain-text index at / on its own listener, apart from the RESP port.
type HTTPServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Listen starts serving reg's metrics on addr ("127.0.0.1:9121"), with
// /readyz answering from ready (nil: always ready). It returns once the
// address is bound; Close stops it.
func Listen(addr string, reg *prometheus.Registry, ready Readiness, log *slog.Logger) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(reg))
	mux.HandleFunc("/healthz", healthz)
	mux.Handle("/readyz", readyz(ready))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "cellserver: /metrics, /healthz, /readyz")
	})
	h := &HTTPServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	if log == nil {
		log = slog.Default()
	}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "path", "/metrics")
	return h, nil
}

// Addr returns the address the metrics are served on.
func (h *HTTPServer) Addr() net.Addr { return h.ln.Addr() }

// Close stops the server: it lets scrapes in flight finish until ctx ends,
// then closes what remains. Its goroutine has exited when Close returns.
func (h *HTTPServer) Close(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close()
	}
	<-h.done
	return err
}

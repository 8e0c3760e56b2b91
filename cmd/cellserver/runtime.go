package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Memory release. The keyspace grows its flat, pointer-free arrays by
// copying them, and the copies left behind are garbage. The collector frees
// them, but the Go runtime keeps freed pages mapped up to its heap goal
// (twice the live heap at GOGC=100): after 10 million keys were loaded the
// process held about 69 bytes per key in RSS for 39 bytes per key live.
// Since the serving path allocates nothing, a collection that returns the
// free pages is needed only after the heap has grown, and costs little: the
// heap holds almost no pointers to mark.
const (
	// trimEvery is how often releaseMemory checks what was allocated.
	trimEvery = 10 * time.Second
	// trimMin is the least allocation since the last release that makes
	// another worth it; it must also be 1/16 of the live heap.
	trimMin = 16 << 20
)

// shouldTrim reports whether allocated bytes since the last release, with
// heap bytes of live (or not yet collected) objects, make a release worth
// its collection.
func shouldTrim(allocated, heap uint64) bool {
	return allocated >= trimMin && allocated >= heap/16
}

// releaseMemory returns freed heap pages to the operating system after the
// heap has grown, every trimEvery, until ctx ends.
func releaseMemory(ctx context.Context, logger *slog.Logger) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	metrics.Read(samples)
	last := samples[0].Value.Uint64()
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		if allocs := samples[0].Value.Uint64(); shouldTrim(allocs-last, samples[1].Value.Uint64()) {
			start := time.Now()
			debug.FreeOSMemory()
			logger.Debug("freed heap pages returned to the OS", "allocated_since_last", allocs-last, "took", time.Since(start))
			metrics.Read(samples)
			last = samples[0].Value.Uint64()
		}
	}
}

// Profiling rates while --pprof-addr is set: one mutex contention event in
// pprofMutexFraction, and blocking events sampled per pprofBlockRate ns
// blocked. Both cost little at these rates and nothing when profiling is off.
const (
	pprofMutexFraction = 100
	pprofBlockRate     = 10_000
)

// startPprof serves net/http/pprof on addr (for example 127.0.0.1:6060)
// and turns on mutex and block profiling. It returns the address it listens
// on and a function that stops the listener and the sampling. Never expose
// it beyond a trusted network: the handlers reveal the command line and can
// load the CPU.
func startPprof(addr string, logger *slog.Logger) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("pprof-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	runtime.SetMutexProfileFraction(pprofMutexFraction)
	runtime.SetBlockProfileRate(pprofBlockRate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("pprof server stopped", "err", err)
		}
	}()
	logger.Info("pprof listening", "addr", ln.Addr().String())
	return ln.Addr().String(), func() {
		_ = srv.Close()
		<-done
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}, nil
}

// Command bench is a load generator for any server that speaks the Redis
// protocol (RESP). It drives one command line, with {key} replaced by a key
// drawn from a uniform or zipf keyspace, over many connections with optional
// pipelining, and reports throughput and latency percentiles from an HDR
// histogram. With -compare it runs the same load against a second server in
// interleaved rounds (A, B, A, B, …) and reports each figure's median and the
// ratio A/B, so that a comparison holds on a shared, noisy machine.
//
// The hot path writes raw RESP through a bufio.Writer and parses replies with
// a bufio.Reader, with no client library, so that the generator is not the
// bottleneck of the measurement.
//
// Usage:
//
//	(cd bench && go run . -addr 127.0.0.1:6380 -preset gcra -c 50 -P 16 -d 5s)
//	(cd bench && go run . -addr 127.0.0.1:6380 -preset gcra -compare 127.0.0.1:6379 -compare-preset set)
//	(cd bench && go run . -cmd 'SET {key} v' -sweep-c 1,10,50,100 -plot out.svg)
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is the whole program: parse flags, run the rounds, report, plot.
func run(args []string, stdout, stderr io.Writer) error {
	// 1. Configuration.
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if cfg.Quiet {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// 2. Measurement: every connection count of the sweep, interleaved rounds.
	results, err := measure(ctx, cfg, logger)
	if err != nil {
		return err
	}

	// 3. Report.
	if err := report(stdout, cfg, results); err != nil {
		return fmt.Errorf("report: %w", err)
	}

	// 4. Plot.
	if cfg.Plot != "" {
		if err := plotResults(cfg.Plot, cfg, results); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		logger.Info("plot written", "file", cfg.Plot)
	}
	if n := totalErrors(results); n > 0 {
		return fmt.Errorf("%d error replies (first: %s)", n, firstError(results))
	}
	return nil
}

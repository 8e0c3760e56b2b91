package main

import (
	"cmp"
	"context"
	"log/slog"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Series is one target measured at one connection count over all rounds.
type Series struct {
	Label       string    `json:"label"` // "A" or "B"
	Addr        string    `json:"addr"`
	Cmd         string    `json:"cmd"`
	Connections int       `json:"connections"`
	Pipeline    int       `json:"pipeline"`
	Rounds      []Figures `json:"rounds"`
	Median      Figures   `json:"median"`
	FirstError  string    `json:"first_error,omitempty"`

	hist *hdrhistogram.Histogram // every round merged, for the CDF
}

// Point is one connection count: server A, and server B with the ratio of
// medians A/B when comparing.
type Point struct {
	Connections int      `json:"connections"`
	A           Series   `json:"a"`
	B           *Series  `json:"b,omitempty"`
	Ratio       *Figures `json:"ratio,omitempty"`
}

// measure runs every connection count of the configuration. With a second
// server the rounds interleave A, B, A, B …, so slow drifts of a shared
// machine (other jobs, thermal limits) fall on both sides alike.
func measure(ctx context.Context, cfg Config, logger *slog.Logger) ([]Point, error) {
	targets := []*target{{Label: "A", Addr: cfg.Addr, Cmd: cfg.Cmd, KeyPrefix: cfg.KeyPrefix, Keys: cfg.Keys}}
	if cfg.CompareAddr != "" {
		targets = append(targets, &target{Label: "B", Addr: cfg.CompareAddr, Cmd: cfg.CompareCmd, KeyPrefix: cfg.CompareKeyPrefix, Keys: cmp.Or(cfg.CompareKeys, cfg.Keys)})
	}
	for _, t := range targets {
		if err := prepare(ctx, &cfg, t); err != nil {
			return nil, err
		}
	}
	var points []Point
	for _, conns := range cfg.ConnCounts() {
		series := make([]*Series, len(targets))
		for i, t := range targets {
			series[i] = &Series{Label: t.Label, Addr: t.Addr, Cmd: t.Cmd, Connections: conns, Pipeline: cfg.Pipeline, hist: newHistogram()}
		}
		for round := range cfg.Rounds {
			for i, t := range targets {
				r, err := runRound(ctx, &cfg, t, conns, round, logger)
				if err != nil {
					return nil, err
				}
				s := series[i]
				s.Rounds = append(s.Rounds, r.Figures)
				s.hist.Merge(r.hist)
				if s.FirstError == "" {
					s.FirstError = r.firstErr
				}
			}
		}
		p := Point{Connections: conns}
		for _, s := range series {
			s.Median = medianFigures(s.Rounds)
		}
		p.A = *series[0]
		if len(series) > 1 {
			p.B = series[1]
			r := ratioFigures(p.A.Median, p.B.Median)
			p.Ratio = &r
		}
		points = append(points, p)
	}
	return points, nil
}

// totalErrors counts the error replies of every round.
func totalErrors(points []Point) int64 {
	var n int64
	for _, p := range points {
		for _, s := range []*Series{&p.A, p.B} {
			if s == nil {
				continue
			}
			for _, r := range s.Rounds {
				n += int64(r.Errors)
			}
		}
	}
	return n
}

// firstError returns the first error reply seen, for the final message.
func firstError(points []Point) string {
	for _, p := range points {
		for _, s := range []*Series{&p.A, p.B} {
			if s != nil && s.FirstError != "" {
				return s.Label + " " + strings.TrimSpace(s.FirstError)
			}
		}
	}
	return ""
}

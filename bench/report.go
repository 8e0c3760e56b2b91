package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// report writes the results in cfg.Format.
func report(w io.Writer, cfg Config, points []Point) error {
	switch cfg.Format {
	case "csv":
		return reportCSV(w, points)
	case "json":
		return reportJSON(w, cfg, points)
	default:
		return reportTable(w, cfg, points)
	}
}

// row is one line of the table or CSV.
type row struct {
	conns    int
	pipeline int
	target   string
	round    string
	cmd      string
	f        Figures
	isRatio  bool
}

// rows flattens the points: every round, then the medians, then the ratio.
func rows(points []Point) []row {
	var out []row
	for _, p := range points {
		series := []*Series{&p.A}
		if p.B != nil {
			series = append(series, p.B)
		}
		n := len(p.A.Rounds)
		for i := range n {
			for _, s := range series {
				out = append(out, row{p.Connections, s.Pipeline, s.Label, strconv.Itoa(i + 1), s.Cmd, s.Rounds[i], false})
			}
		}
		for _, s := range series {
			out = append(out, row{p.Connections, s.Pipeline, s.Label, "median", s.Cmd, s.Median, false})
		}
		if p.Ratio != nil {
			out = append(out, row{p.Connections, p.A.Pipeline, "A/B", "ratio", "", *p.Ratio, true})
		}
	}
	return out
}

func reportTable(w io.Writer, cfg Config, points []Point) error {
	fmt.Fprintf(w, "A  %s  %s\n", cfg.Addr, cfg.Cmd)
	if cfg.CompareAddr != "" {
		fmt.Fprintf(w, "B  %s  %s\n", cfg.CompareAddr, cfg.CompareCmd)
	}
	length := cfg.Duration.String()
	if cfg.Requests > 0 {
		length = strconv.FormatInt(cfg.Requests, 10) + " requests"
	}
	dist := cfg.Dist
	if dist == "zipf" {
		dist += " s=" + strconv.FormatFloat(cfg.ZipfS, 'g', -1, 64)
	}
	fmt.Fprintf(w, "keys %d %s, pipeline %d, %s per round after %s warm-up, %d rounds\n\n",
		cfg.Keys, dist, cfg.Pipeline, length, cfg.Warmup, cfg.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conns\ttarget\tround\trequests\terrors\treq/s\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\t")
	for _, r := range rows(points) {
		if r.isRatio {
			fmt.Fprintf(tw, "%d\t%s\t%s\t\t\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
				r.conns, r.target, r.round, r.f.Throughput, r.f.P50, r.f.P99, r.f.P999, r.f.Max)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.conns, r.target, r.round, r.f.Requests, r.f.Errors, r.f.Throughput, r.f.P50, r.f.P99, r.f.P999, r.f.Max)
	}
	return tw.Flush()
}

// reportCSV writes one record per round, median and ratio; latencies are
// microseconds, and a ratio with a zero denominator is an empty field.
func reportCSV(w io.Writer, points []Point) error {
	cw := csv.NewWriter(w)
	header := []string{"connections", "pipeline", "target", "round", "cmd", "requests", "errors", "seconds", "rps", "p50_us", "p99_us", "p999_us", "max_us"}
	if err := cw.Write(header); err != nil {
		return err
	}
	num := func(x float64, prec int) string {
		if math.IsNaN(x) {
			return ""
		}
		return strconv.FormatFloat(x, 'f', prec, 64)
	}
	for _, r := range rows(points) {
		f := r.f
		// Counts as they are, seconds to the millisecond, rates and
		// latencies to one decimal, ratios to four.
		cnt, sec, rate, lat := -1, 3, 1, 1
		if r.isRatio {
			cnt, sec, rate, lat = 4, 4, 4, 4
		}
		rec := []string{strconv.Itoa(r.conns), strconv.Itoa(r.pipeline), r.target, r.round, r.cmd,
			num(f.Requests, cnt), num(f.Errors, cnt), num(f.Seconds, sec), num(f.Throughput, rate),
			num(f.P50, lat), num(f.P99, lat), num(f.P999, lat), num(f.Max, lat)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonReport is the -format json document.
type jsonReport struct {
	Addr        string  `json:"addr"`
	Cmd         string  `json:"cmd"`
	CompareAddr string  `json:"compare_addr,omitempty"`
	CompareCmd  string  `json:"compare_cmd,omitempty"`
	Keys        int     `json:"keys"`
	Dist        string  `json:"dist"`
	ZipfS       float64 `json:"zipf_s,omitempty"`
	Pipeline    int     `json:"pipeline"`
	Duration    string  `json:"duration,omitempty"`
	Requests    int64   `json:"requests_per_round,omitempty"`
	Warmup      string  `json:"warmup"`
	Rounds      int     `json:"rounds"`
	Points      []Point `json:"points"`
}

func reportJSON(w io.Writer, cfg Config, points []Point) error {
	doc := jsonReport{
		Addr: cfg.Addr, Cmd: cfg.Cmd, Keys: cfg.Keys, Dist: cfg.Dist, Pipeline: cfg.Pipeline,
		Warmup: cfg.Warmup.String(), Rounds: cfg.Rounds, Points: sanitize(points),
	}
	if cfg.CompareAddr != "" {
		doc.CompareAddr, doc.CompareCmd = cfg.CompareAddr, cfg.CompareCmd
	}
	if cfg.Dist == "zipf" {
		doc.ZipfS = cfg.ZipfS
	}
	if cfg.Requests > 0 {
		doc.Requests = cfg.Requests
	} else {
		doc.Duration = cfg.Duration.String()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// sanitize replaces NaN ratios (a zero denominator, such as 0 errors on both
// sides) by 0, which JSON can carry.
func sanitize(points []Point) []Point {
	out := make([]Point, len(points))
	for i, p := range points {
		out[i] = p
		if p.Ratio != nil {
			r := *p.Ratio
			for _, x := range []*float64{&r.Requests, &r.Errors, &r.Seconds, &r.Throughput, &r.P50, &r.P99, &r.P999, &r.Max} {
				if math.IsNaN(*x) {
					*x = 0
				}
			}
			out[i].Ratio = &r
		}
	}
	return out
}

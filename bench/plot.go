package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotResults writes two panels side by side to path (.svg or .png): median
// throughput against connections for each server, and the latency CDF of
// every series (all rounds merged) on a logarithmic latency axis.
func plotResults(path string, cfg Config, points []Point) error {
	thr, err := throughputPlot(cfg, points)
	if err != nil {
		return err
	}
	cdf, err := cdfPlot(points)
	if err != nil {
		return err
	}
	const width, height = 26 * vg.Centimeter, 11 * vg.Centimeter
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	plots := [][]*plot.Plot{{thr, cdf}}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var writeErr error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		c := vgsvg.New(width, height)
		drawTiles(plots, tiles, draw.New(c))
		_, writeErr = c.WriteTo(f)
	default:
		c := vgimg.New(width, height)
		dc := draw.New(c)
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		drawTiles(plots, tiles, dc)
		_, writeErr = vgimg.PngCanvas{Canvas: c}.WriteTo(f)
	}
	if err := f.Close(); writeErr == nil {
		writeErr = err
	}
	if writeErr != nil {
		return fmt.Errorf("write %s: %w", path, writeErr)
	}
	return nil
}

func drawTiles(plots [][]*plot.Plot, t draw.Tiles, dc draw.Canvas) {
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(canvases[i][j])
		}
	}
}

// throughputPlot draws median requests per second against connections.
func throughputPlot(cfg Config, points []Point) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput (pipeline %d, %d keys)", cfg.Pipeline, cfg.Keys)
	p.X.Label.Text = "connections"
	p.Y.Label.Text = "requests per second, median of rounds"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	sides := []struct {
		name string
		get  func(Point) *Series
	}{
		{"A", func(pt Point) *Series { return &pt.A }},
		{"B", func(pt Point) *Series { return pt.B }},
	}
	top := 0.0
	for i, side := range sides {
		var xys plotter.XYs
		var label string
		for _, pt := range points {
			s := side.get(pt)
			if s == nil {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(pt.Connections), Y: s.Median.Throughput})
			top = max(top, s.Median.Throughput)
			label = side.name + " " + s.Addr + " " + commandName(s.Cmd)
		}
		if len(xys) == 0 {
			continue
		}
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(line, pts)
		p.Legend.Add(label, line, pts)
	}
	p.Y.Max = top * 1.3 // room for the legend above the lines
	p.Y.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		ticks := plot.DefaultTicks{}.Ticks(min, max)
		for i := range ticks {
			if ticks[i].Label != "" && ticks[i].Value != 0 {
				ticks[i].Label = strconv.FormatFloat(ticks[i].Value/1000, 'f', -1, 64) + "k"
			}
		}
		return ticks
	})
	return p, nil
}

// cdfStep is the least ratio between the latencies of two consecutive
// points of a CDF curve.
const cdfStep = 1.03

// cdfPlot draws the fraction of requests answered within a latency.
func cdfPlot(points []Point) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency CDF (all rounds)"
	p.X.Label.Text = "latency (µs, log scale)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	// The legend sits bottom right, in room made by extending the latency
	// axis past the slowest request, so it never hides a curve.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.ThumbnailWidth = vg.Centimeter
	slowest := 0.0
	n := 0
	for _, pt := range points {
		for _, s := range []*Series{&pt.A, pt.B} {
			if s == nil || s.hist == nil || s.hist.TotalCount() == 0 {
				continue
			}
			// The fraction of requests answered within a bucket's upper
			// bound, at most one point per cdfStep of latency (an HDR
			// histogram has thousands of buckets; drawing each would make
			// the SVG megabytes), and always the last.
			var xys plotter.XYs
			total := float64(s.hist.TotalCount())
			var seen int64
			dist := s.hist.Distribution()
			for i, b := range dist {
				if b.Count == 0 {
					continue
				}
				x := float64(max(b.To, 1)) / 1e3
				if len(xys) == 0 {
					xys = append(xys, plotter.XY{X: float64(max(b.From, 1)) / 1e3, Y: 0})
				}
				seen += b.Count
				pt := plotter.XY{X: x, Y: float64(seen) / total}
				if last := &xys[len(xys)-1]; len(xys) > 1 && x < last.X*cdfStep && seen < s.hist.TotalCount() && i < len(dist)-1 {
					continue
				}
				xys = append(xys, pt)
			}
			slowest = max(slowest, xys[len(xys)-1].X)
			if len(xys) == 0 {
				continue
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			line.Color = plotutil.Color(n)
			line.Dashes = plotutil.Dashes(n / 7)
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s %s c=%d", s.Label, commandName(s.Cmd), pt.Connections), line)
			n++
		}
	}
	if slowest > 0 {
		p.X.Max = slowest * 100
	}
	return p, nil
}

// commandName returns the first word of a command line, upper-cased.
func commandName(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return ""
	}
	return strings.ToUpper(f[0])
}

// Command regionplot draws the over-admission of an async region key
// against the bound docs/regions.md states, from the CSV that
// TestRegionsMeasure writes (CELLSERVER_MEASURE_REGIONS_CSV): one series per
// sync interval s, admitted requests against the one-way delay d between
// regions, the median of the rounds with their range as error bars, the
// stated bound for the same s as a dashed line, and the exact figure
// (L + r·T) and what each region alone would admit as references.
//
// Usage:
//
//	(cd bench && go run ./regionplot -in ../regions.csv -o ../docs/img/regions-overadmission.svg)
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "", "CSV written by TestRegionsMeasure")
	out := flag.String("o", "regions-overadmission.svg", "output file (.svg or .png)")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "regionplot:", err)
		os.Exit(1)
	}
}

// run reads the runs from in and writes the plot to out.
func run(in, out string) error {
	if in == "" {
		return errors.New("-in is required")
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	runs, err := readRuns(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	p, err := overAdmissionPlot(runs)
	if err != nil {
		return err
	}
	return p.Save(18*vg.Centimeter, 13*vg.Centimeter, out)
}

// measuredRun is one row of the CSV: one run of three regions with one-way
// delay D and sync interval S (milliseconds).
type measuredRun struct {
	D, S                          int
	Admitted                      int
	Exact, Bound, EachRegionAlone float64
}

// readRuns parses the CSV, header first (d_ms,s_ms,round,admitted,exact,
// bound,alone).
func readRuns(r io.Reader) ([]measuredRun, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	want := []string{"d_ms", "s_ms", "round", "admitted", "exact", "bound", "alone"}
	if len(rows) < 2 || !slices.Equal(rows[0], want) {
		return nil, fmt.Errorf("want a header %v and at least one run", want)
	}
	var runs []measuredRun
	for i, row := range rows[1:] {
		var v [7]float64
		for j, cell := range row {
			if v[j], err = strconv.ParseFloat(cell, 64); err != nil {
				return nil, fmt.Errorf("row %d, %s: %w", i+2, want[j], err)
			}
		}
		runs = append(runs, measuredRun{D: int(v[0]), S: int(v[1]), Admitted: int(v[3]), Exact: v[4], Bound: v[5], EachRegionAlone: v[6]})
	}
	return runs, nil
}

// series is what one sync interval contributes: per delay, the admitted
// counts of every round and the stated bound.
type series struct {
	delays   []int
	admitted map[int][]float64
	bound    map[int]float64
}

func groupBySyncInterval(runs []measuredRun) (intervals []int, by map[int]*series) {
	by = map[int]*series{}
	for _, r := range runs {
		s := by[r.S]
		if s == nil {
			s = &series{admitted: map[int][]float64{}, bound: map[int]float64{}}
			by[r.S] = s
			intervals = append(intervals, r.S)
		}
		if _, seen := s.admitted[r.D]; !seen {
			s.delays = append(s.delays, r.D)
		}
		s.admitted[r.D] = append(s.admitted[r.D], float64(r.Admitted))
		s.bound[r.D] = max(s.bound[r.D], r.Bound)
	}
	slices.Sort(intervals)
	for _, s := range by {
		slices.Sort(s.delays)
	}
	return intervals, by
}

// medianRange returns the median of v and its distance to the least and
// the greatest value.
func medianRange(v []float64) (median, below, above float64) {
	v = slices.Sorted(slices.Values(v))
	median = v[len(v)/2]
	if len(v)%2 == 0 {
		median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return median, median - v[0], v[len(v)-1] - median
}

// medianErrors is a series of medians with their ranges, as plotter's
// error bars want it.
type medianErrors struct {
	plotter.XYs
	plotter.YErrors
}

func overAdmissionPlot(runs []measuredRun) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Async key over three regions: admitted vs stated bound"
	p.X.Label.Text = "one-way delay between regions d (ms)"
	p.Y.Label.Text = "requests admitted in T (GCRA, L = 10, r = 10/s)"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.ThumbnailWidth = vg.Centimeter

	intervals, by := groupBySyncInterval(runs)
	var minD, maxD, exact, alone float64 = 1e9, 0, 0, 0
	for _, r := range runs {
		minD, maxD = min(minD, float64(r.D)), max(maxD, float64(r.D))
		exact, alone = max(exact, r.Exact), max(alone, r.EachRegionAlone)
	}
	for i, s := range intervals {
		ser := by[s]
		var me medianErrors
		var bound plotter.XYs
		for _, d := range ser.delays {
			m, lo, hi := medianRange(ser.admitted[d])
			me.XYs = append(me.XYs, plotter.XY{X: float64(d), Y: m})
			me.YErrors = append(me.YErrors, struct{ Low, High float64 }{lo, hi})
			bound = append(bound, plotter.XY{X: float64(d), Y: ser.bound[d]})
		}
		line, pts, err := plotter.NewLinePoints(me.XYs)
		if err != nil {
			return nil, err
		}
		bars, err := plotter.NewYErrorBars(me)
		if err != nil {
			return nil, err
		}
		bl, err := plotter.NewLine(bound)
		if err != nil {
			return nil, err
		}
		c := plotutil.Color(i)
		line.Color, pts.Color, bars.Color, bl.Color = c, c, c, c
		pts.Shape = plotutil.Shape(i)
		bl.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(line, pts, bars, bl)
		p.Legend.Add(fmt.Sprintf("admitted, s = %d ms (median, range)", s), line, pts)
		p.Legend.Add(fmt.Sprintf("stated bound, s = %d ms", s), bl)
	}
	for _, ref := range []struct {
		label string
		y     float64
		dash  []vg.Length
	}{
		{"exact (L + r·T)", exact, nil},
		{"each region alone (R·(L + r·T))", alone, []vg.Length{vg.Points(1), vg.Points(3)}},
	} {
		l, err := plotter.NewLine(plotter.XYs{{X: minD, Y: ref.y}, {X: maxD, Y: ref.y}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 0x60}
		l.Dashes = ref.dash
		p.Add(l)
		p.Legend.Add(ref.label, l)
	}
	p.Y.Max = alone * 1.75 // room for the legend above the lines
	var ticks []plot.Tick  // at the measured delays
	for _, d := range by[intervals[0]].delays {
		ticks = append(ticks, plot.Tick{Value: float64(d), Label: strconv.Itoa(d)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	return p, nil
}

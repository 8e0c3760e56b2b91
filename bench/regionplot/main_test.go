package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRuns(t *testing.T) {
	const header = "d_ms,s_ms,round,admitted,exact,bound,alone\n"
	tests := []struct {
		name    string
		in      string
		want    []measuredRun
		wantErr string
	}{
		{"one run", header + "20,50,1,40,40.10,61.40,120.30\n",
			[]measuredRun{{D: 20, S: 50, Admitted: 40, Exact: 40.1, Bound: 61.4, EachRegionAlone: 120.3}}, ""},
		{"no runs", header, nil, "at least one run"},
		{"another header", "d,s,round,admitted,exact,bound,alone\n1,2,3,4,5,6,7\n", nil, "want a header"},
		{"not a number", header + "20,50,1,forty,40,61,120\n", nil, "row 2, admitted"},
		{"short row", header + "20,50,1\n", nil, "wrong number of fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readRuns(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || got[0] != tt.want[0] {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMedianRange(t *testing.T) {
	tests := []struct {
		in             []float64
		median, lo, hi float64
	}{
		{[]float64{40}, 40, 0, 0},
		{[]float64{45, 39, 42}, 42, 3, 3},
		{[]float64{39, 40, 44, 41}, 40.5, 1.5, 3.5},
	}
	for _, tt := range tests {
		m, lo, hi := medianRange(tt.in)
		if m != tt.median || lo != tt.lo || hi != tt.hi {
			t.Errorf("medianRange(%v) = %v -%v +%v, want %v -%v +%v", tt.in, m, lo, hi, tt.median, tt.lo, tt.hi)
		}
	}
}

// The plot has a series and a bound per sync interval, whatever order
// the rounds came in.
func TestPlotFromRuns(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "runs.csv")
	csv := "d_ms,s_ms,round,admitted,exact,bound,alone\n"
	for _, row := range []string{"100,500,1,45,40,72,120", "20,50,1,40,40,61.4,120", "20,500,1,40,40,70.4,120", "100,50,1,39,40,63,120", "20,50,2,41,40,61.4,120"} {
		csv += row + "\n"
	}
	if err := os.WriteFile(in, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	intervals, by := groupBySyncInterval(mustRead(t, csv))
	if len(intervals) != 2 || intervals[0] != 50 || intervals[1] != 500 {
		t.Fatalf("sync intervals %v, want [50 500]", intervals)
	}
	if d := by[50].delays; len(d) != 2 || d[0] != 20 || d[1] != 100 {
		t.Fatalf("s = 50 ms delays %v, want [20 100]", d)
	}
	if a := by[50].admitted[20]; len(a) != 2 {
		t.Fatalf("s = 50 ms, d = 20 ms: %v, want two rounds", a)
	}
	out := filepath.Join(dir, "plot.svg")
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "s = 50 ms", "s = 500 ms", "stated bound", "exact"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the plot has no %q", want)
		}
	}
}

func mustRead(t *testing.T, csv string) []measuredRun {
	t.Helper()
	runs, err := readRuns(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

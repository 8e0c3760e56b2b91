package replication

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics"
)

// TestMain prints raft's own timings (commit time, disk appends, RPCs)
// after the run when RAFT_METRICS is set, e.g. with the benchmark:
//
//	RAFT_METRICS=1 go test -run XXX -bench Write ./replication
func TestMain(m *testing.M) {
	sink := metrics.NewInmemSink(time.Hour, time.Hour)
	if os.Getenv("RAFT_METRICS") != "" {
		metrics.NewGlobal(metrics.DefaultConfig("x"), sink)
	}
	code := m.Run()
	if os.Getenv("RAFT_METRICS") != "" {
		for _, iv := range sink.Data() {
			var names []string
			for k := range iv.Samples {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				s := iv.Samples[k]
				fmt.Printf("%-70s n=%-8d mean=%.3f max=%.3f\n", k, s.Count, s.Sum/float64(s.Count), s.Max)
			}
		}
	}
	os.Exit(code)
}

package serverstats

import (
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/keyclass"
)

func sectionTitles(report []byte) []string {
	var out []string
	for _, line := range strings.Split(string(report), "\r\n") {
		if t, ok := strings.CutPrefix(line, "# "); ok {
			out = append(out, t)
		}
	}
	return out
}

// TestSelect: INFO's arguments choose sections as Redis's do: none or
// "default" the default set, "all"/"everything" every section (the extra
// ones too), names in any case; an extra section only by all or its name.
func TestSelect(t *testing.T) {
	in := &Info{Extra: []Section{{Name: "rls", Fields: func() []Field { return []Field{{"rls_requests", "7"}} }}}}
	def := "Server Clients Memory Persistence Stats Replication CPU Cluster Keyspace"
	every := def + " Commandstats Latencystats Hotkeys Classes Regions Rls"
	tests := []struct {
		args []string
		want string
	}{
		{nil, def},
		{[]string{"default"}, def},
		{[]string{"ALL"}, every},
		{[]string{"everything"}, every},
		{[]string{"Memory", "hotkeys"}, "Memory Hotkeys"},
		{[]string{"rls"}, "Rls"},
		{[]string{"nosuch"}, ""},
		{[]string{"default", "commandstats"}, "Server Clients Memory Persistence Stats Replication CPU Cluster Keyspace Commandstats"},
	}
	for _, tc := range tests {
		var args [][]byte
		for _, a := range tc.args {
			args = append(args, []byte(a))
		}
		if got := strings.Join(sectionTitles(Append(nil, in, Select(args))), " "); got != tc.want {
			t.Errorf("INFO %v sections = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestAppendFields: the sections word the snapshot's values as INFO's
// lines (a sample of each kind: totals, per-command lines, lists of
// pairs, the fixed fields of a part that is off).
func TestAppendFields(t *testing.T) {
	in := &Info{
		Stats: Stats{
			Commands: []CommandStats{
				{Name: "cl.throttle", Limiter: true, Decides: true, Calls: 4, Allowed: 3, Limited: 1, Time: 10 * time.Microsecond},
				{Name: "cl.inspect", Limiter: true, Calls: 2, Time: 3 * time.Microsecond},
				{Name: "ping"},
			},
			MaxMemory:    3 << 20,
			Classes:      []keyclass.Counts{{Name: "user", Allowed: 5, Limited: 2}},
			HotRequested: []HotKey{{Key: "k", Command: "cl.throttle", Count: 64, Err: 3}},
		},
		WaitLines:     []byte("waited_requests:0\r\n"),
		Replication:   [][2]string{{"role", "master"}, {"cluster_state", "ok"}},
		Hotkeys:       Hotkeys{Capacity: 8, Sample: 32},
		ClassPrefixes: 1,
	}
	got := string(Append(nil, in, Select([][]byte{[]byte("all")})))
	for _, want := range []string{
		"\r\ntotal_commands_processed:6\r\n",
		"\r\nlimiter_allowed:3\r\nlimiter_limited:1\r\n",
		"\r\nshadow_limited:0\r\nwaited_requests:0\r\nviolations_logged:0\r\n",
		"\r\nallowed_cl.throttle:3\r\nlimited_cl.throttle:1\r\n",
		"\r\ncmdstat_cl.throttle:calls=4,usec=10,usec_per_call=2.50,rejected_calls=0,failed_calls=0,allowed=3,limited=1\r\n",
		"\r\ncmdstat_cl.inspect:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0,allowed=0,limited=0\r\n",
		"\r\nmaxmemory_human:3.00M\r\n",
		"# Replication\r\nrole:master\r\ncluster_state:ok\r\n",
		"# Persistence\r\nloading:0\r\n",
		"\r\nrequested_0:key=\"k\",cmd=cl.throttle,count=64,error=3\r\n",
		"\r\nmetrics_class_prefixes:1\r\nclass_user:kind=",
		"# Regions\r\nregion:\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO all lacks %q:\n%s", want, got)
		}
	}
	for _, absent := range []string{"allowed_cl.inspect", "cmdstat_ping", "latency_percentiles_usec_"} {
		if strings.Contains(got, absent) {
			t.Errorf("INFO all holds %q:\n%s", absent, got)
		}
	}
}

package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSoak is a bounded soak test, outside the normal test run: it runs
// the real binary under full load with connection churn, malformed and
// never-finished requests and key churn, and checks that memory,
// goroutines and file descriptors are flat at the end. It runs only when
// CELLSERVER_SOAK is set to a duration:
//
//	CELLSERVER_SOAK=5m go test ./test -run TestSoak -v -timeout 30m
//
// It samples the process's resident memory and open descriptors from
// /proc (Linux), and goroutines and heap from INFO, before the load, every
// 30 s, and after the load once the server has settled (clients gone and
// churned keys expired).
func TestSoak(t *testing.T) {
	v := os.Getenv("CELLSERVER_SOAK")
	if v == "" {
		t.Skip("set CELLSERVER_SOAK=5m to run the soak test")
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur <= 0 {
		t.Fatalf("CELLSERVER_SOAK=%q: want a duration such as 5m", v)
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("the soak test reads /proc (Linux)")
	}
	s := startServer(t, "--save", "30", "--client-query-timeout", "2", "--client-query-buffer-limit", "4mb", "--maxclients", "2000")
	pid := s.cmd.Process.Pid
	ctx := context.Background()
	probe := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, PoolSize: 1})
	t.Cleanup(func() { probe.Close() })

	sample := func(label string) soakSample {
		t.Helper()
		sm := soakSample{label: label, at: time.Now()}
		sm.rss = procRSS(t, pid)
		sm.fds = procFDs(t, pid)
		info, err := probe.Info(ctx, "cpu", "memory", "clients", "keyspace", "stats").Result()
		if err != nil {
			t.Fatalf("INFO: %v", err)
		}
		f := parseInfo(info)
		num := func(field string) int64 {
			t.Helper()
			n, err := strconv.ParseInt(f[field], 10, 64)
			if err != nil {
				t.Fatalf("INFO %s = %q, want an integer", field, f[field])
			}
			return n
		}
		sm.goroutines = num("goroutines")
		sm.heap = num("used_memory")
		sm.clients = num("connected_clients")
		sm.commands = num("total_commands_processed")
		// db0:keys=N,expires=N,avg_ttl=N; no db0 line when empty.
		if db, ok := f["db0"]; ok {
			keys, _, _ := strings.Cut(strings.TrimPrefix(db, "keys="), ",")
			f["db0_keys"] = keys
			sm.keys = num("db0_keys")
		}
		return sm
	}
	var samples []soakSample
	samples = append(samples, sample("start (idle)"))

	loadCtx, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var wg sync.WaitGroup
	var ops, churned, malformed, errs atomic.Int64
	run := func(n int, f func(r *rand.Rand)) {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 7))
				for loadCtx.Err() == nil {
					f(r)
				}
			}(uint64(i + 1))
		}
	}
	var keySeq atomic.Int64
	// Steady load: pipelines of limiter commands on churning keys (new
	// names all the time, windows of 1-3 s, so keys keep expiring).
	run(6, func(r *rand.Rand) {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2 + r.IntN(2), PoolSize: 1, MaxRetries: -1})
		defer c.Close()
		for k := 0; k < 200 && loadCtx.Err() == nil; k++ {
			p := c.Pipeline()
			for j := 0; j < 50; j++ {
				key := "soak:" + strconv.FormatInt(keySeq.Add(1)%50000, 10)
				switch r.IntN(6) {
				case 0:
					p.Do(loadCtx, "CL.THROTTLE", key, 5, 10, 2)
				case 1:
					p.Do(loadCtx, "TB.TAKE", key+":tb", 10, 5, "1s")
				case 2:
					p.Do(loadCtx, "LB.ADD", key+":lb", 10, 5, "1s")
				case 3:
					p.Do(loadCtx, "FW.INCR", key+":fw", 100, "2s")
				case 4:
					p.Do(loadCtx, "SW.INCR", key+":sw", 100, "1s")
				case 5:
					p.Do(loadCtx, "SL.ADD", key+":sl", 20, "1s")
				}
			}
			if _, err := p.Exec(loadCtx); err != nil && loadCtx.Err() == nil {
				errs.Add(1)
			}
			ops.Add(50)
		}
	})
	// Connection churn: short-lived clients, some speaking RESP3 with
	// CLIENT SETNAME, some plain inline commands.
	run(2, func(r *rand.Rand) {
		nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			errs.Add(1)
			return
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(nc, "HELLO 3\r\nCLIENT SETNAME churn%d\r\nCL.THROTTLE churn:%d 1 1 1\r\nPING\r\nQUIT\r\n", r.IntN(100), r.IntN(1000))
		buf := make([]byte, 4096)
		for {
			if _, err := nc.Read(buf); err != nil {
				break
			}
		}
		nc.Close()
		churned.Add(1)
	})
	// Hostile clients: malformed protocol, forged lengths, oversized
	// arguments, and commands never finished (the query timeout closes
	// those after 2 s).
	hostile := []string{
		"*1\r\n$x\r\n", "*2147483648\r\n", "*1\r\n$9223372036854775807\r\n", "*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nke",
		"\x00\xff\xfe garbage\r\n", "ECHO \"unbalanced\r\n", "*2\r\n$4\r\nECHO\r\n$5000000\r\n", "CL.THROTTLE k -1 0 0\r\n",
		"*1\r\n$4\r\nPI", "SL.ADD k 999999999 1s\r\n", "SCAN 0 COUNT 999999999999\r\n", "KEYS *a*a*a*a*a*a*a*a*b\r\n",
	}
	run(6, func(r *rand.Rand) {
		nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			errs.Add(1)
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(4 * time.Second))
		in := hostile[r.IntN(len(hostile))]
		if strings.Contains(in, "$5000000") {
			in += strings.Repeat("x", 1<<20) // then stop: never finished
		}
		if r.IntN(4) == 0 {
			junk := make([]byte, 1+r.IntN(512))
			for i := range junk {
				junk[i] = byte(r.IntN(256))
			}
			in = string(junk)
		}
		nc.Write([]byte(in))
		buf := make([]byte, 512)
		nc.Read(buf) // a reply, a close, or the query timeout
		malformed.Add(1)
	})

	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	start := time.Now()
loop:
	for {
		select {
		case <-loadCtx.Done():
			break loop
		case <-tick.C:
			samples = append(samples, sample(fmt.Sprintf("load +%v", time.Since(start).Round(time.Second))))
		}
	}
	wg.Wait()

	// Settle: clients gone, churned keys expired and swept.
	deadline := time.Now().Add(60 * time.Second)
	var end soakSample
	for {
		end = sample("end (settled)")
		if end.clients <= 1 && end.keys < 1000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // polling interval
	}
	samples = append(samples, end)

	t.Logf("soak %v: %d limiter ops pipelined, %d churned connections, %d hostile connections, %d client-side errors",
		dur, ops.Load(), churned.Load(), malformed.Load(), errs.Load())
	t.Logf("%-16s %10s %8s %11s %12s %8s %10s %12s", "sample", "rss", "fds", "goroutines", "heap", "clients", "keys", "commands")
	for _, sm := range samples {
		t.Logf("%-16s %10s %8d %11d %12s %8d %10d %12d", sm.label, mib(sm.rss), sm.fds, sm.goroutines, mib(sm.heap), sm.clients, sm.keys, sm.commands)
	}
	first := samples[0]
	if end.fds > first.fds+4 {
		t.Errorf("open descriptors = %d, want at most %d (%d before the load + 4)", end.fds, first.fds+4, first.fds)
	}
	if end.goroutines > first.goroutines+4 {
		t.Errorf("goroutines = %d, want at most %d (%d before the load + 4)", end.goroutines, first.goroutines+4, first.goroutines)
	}
	if end.clients > 1 {
		t.Errorf("connected_clients after the load = %d, want at most 1 (the probe)", end.clients)
	}
	// Every churned key's state is fresh again within 2 s of its last use.
	if end.keys >= 1000 {
		t.Errorf("keys after the load = %d, want under 1000: churned keys did not expire", end.keys)
	}
	// The heap after the load holds what the keyspace's tables kept for
	// reuse and garbage not yet collected: bounded, not growing with time.
	if end.heap > first.heap+64<<20 {
		t.Errorf("heap = %s, want at most %s (%s before the load + 64 MiB)", mib(end.heap), mib(first.heap+64<<20), mib(first.heap))
	}
	s.stop()
}

type soakSample struct {
	label                          string
	at                             time.Time
	rss, heap                      int64
	fds, goroutines, clients, keys int64
	commands                       int64
}

func mib(b int64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

// procRSS reads the resident set size (VmRSS) of pid.
func procRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// procFDs counts the open file descriptors of pid.
func procFDs(t *testing.T, pid int) int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(ents))
}

package test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
)

// The three front-door examples take one command line (--listen,
// --cellserver, --fail-closed) and limit GET /hello per client IP by the
// same two policies: "burst", 20 at once and 10 per second, and "daily",
// 10,000 a day, with the legacy fields on. These tests run each against a
// real server and compare what they answer.

// exampleApp is one example: how to start it, or why it cannot run here.
type exampleApp struct {
	name string
	// command returns the program and its first arguments, or skips.
	command func(t *testing.T) []string
}

var exampleApps = []exampleApp{
	{"go", func(t *testing.T) []string {
		bin := filepath.Join(t.TempDir(), "httplimit")
		if out, err := exec.Command("go", "build", "-o", bin, "../examples/httplimit").CombinedOutput(); err != nil {
			t.Fatalf("build examples/httplimit: %v\n%s", err, out)
		}
		return []string{bin}
	}},
	{"python", func(t *testing.T) []string {
		const app = "../examples/python/app.py"
		if _, err := os.Stat(app); err != nil {
			t.Skipf("no %s: %v", app, err)
		}
		const py = "/usr/bin/python3"
		if out, err := exec.Command(py, "-c", "import redis, starlette, uvicorn").CombinedOutput(); err != nil {
			t.Skipf("%s cannot import redis, starlette and uvicorn (scripts/test.sh installs python3-redis python3-starlette python3-uvicorn): %v\n%s", py, err, out)
		}
		return []string{py, app}
	}},
	{"node", func(t *testing.T) []string {
		const dir, app = "../examples/node", "../examples/node/app.js"
		if _, err := os.Stat(app); err != nil {
			t.Skipf("no %s: %v", app, err)
		}
		node, err := exec.LookPath("node")
		if err != nil {
			t.Skip("no node in PATH")
		}
		check := exec.Command(node, "-e", "require.resolve('express'); require.resolve('cellserver-limit')")
		check.Dir = dir
		if out, err := check.CombinedOutput(); err != nil {
			t.Skipf("examples/node's packages are not installed (scripts/test.sh runs npm ci there): %v\n%s", err, out)
		}
		return []string{node, app}
	}},
}

// exampleProc is a running example.
type exampleProc struct {
	URL  string // http://127.0.0.1:port
	logs *testlog.Buffer
}

// startExample runs app against the cellserver at server with extra
// flags, and waits for its "listening on" line.
func startExample(t *testing.T, argv []string, server string, extra ...string) *exampleProc {
	t.Helper()
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	args := append(append(argv[1:len(argv):len(argv)], "--listen", listen, "--cellserver", server), extra...)
	cmd := exec.Command(argv[0], args...)
	p := &exampleProc{URL: "http://" + listen, logs: &testlog.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	poll.Until(t, 30*time.Second, func() error {
		if !strings.Contains(p.logs.String(), "listening on "+listen) {
			return fmt.Errorf("no %q line yet:\n%s", "listening on "+listen, p.logs.String())
		}
		return nil
	})
	return p
}

// fieldNames are the fields the examples must answer alike.
var fieldNames = []string{"RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

type answer struct {
	status int
	fields map[string]string // "" for an absent field
	ctype  string
	body   []byte
	took   time.Duration
}

func get(t *testing.T, c *http.Client, url string) answer {
	t.Helper()
	start := time.Now()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: res.StatusCode, fields: map[string]string{}, ctype: res.Header.Get("Content-Type"), body: body, took: time.Since(start)}
	for _, name := range fieldNames {
		a.fields[name] = strings.Join(res.Header.Values(name), ", ")
	}
	return a
}

// TestExamplesLimit: each example admits 20 requests at once, then
// answers 429 with Retry-After and a problem+json body; the first and the
// first refused request carry the same fields in every example. The
// first request's are exact; the refusal's too, but for the daily
// policy's, which depend on how many were admitted (n, 20 plus one per
// 100 ms the 20 took) and when: compared with what n and the time allow.
func TestExamplesLimit(t *testing.T) {
	firsts := map[string]map[string]string{}
	refusals := map[string]map[string]string{}
	for _, app := range exampleApps {
		t.Run(app.name, func(t *testing.T) {
			argv := app.command(t)
			s := startServer(t, "--save", "")
			p := startExample(t, argv, s.Addr)
			c := &http.Client{Timeout: 10 * time.Second}
			start := time.Now()
			var admitted int
			var first, refused answer
			for i := 0; ; i++ {
				a := get(t, c, p.URL+"/hello")
				if i == 0 {
					first = a
				}
				if a.status == http.StatusTooManyRequests {
					refused = a
					break
				}
				if a.status != http.StatusOK || string(a.body) != "hello\n" {
					t.Fatalf("request %d: %d %q, want 200 hello", i+1, a.status, a.body)
				}
				admitted++
				// 20 at once, then 10 per second: never more than this.
				if limit := 20 + int(10*time.Since(start).Seconds()) + 1; admitted > limit {
					t.Fatalf("%d admitted in %v, above the limit", admitted, time.Since(start))
				}
			}
			elapsed := time.Since(start)
			t.Logf("%d admitted in %v, then refused", admitted, elapsed)
			if admitted < 20 {
				t.Fatalf("only %d admitted before the first 429, want 20", admitted)
			}
			if admitted > 20 && elapsed < 100*time.Millisecond {
				t.Errorf("%d admitted within %v, want 20", admitted, elapsed)
			}
			wantFirst := map[string]string{
				"RateLimit-Policy":  `"burst";q=20;w=2, "daily";q=10000;w=86400`,
				"RateLimit":         `"burst";r=19;t=1, "daily";r=9999;t=9`,
				"Retry-After":       "",
				"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "19", "X-RateLimit-Reset": "1",
			}
			for name, want := range wantFirst {
				if got := first.fields[name]; got != want {
					t.Errorf("first request: %s = %q, want %q", name, got, want)
				}
			}
			// Refused by burst: its key is exhausted, so 1.9 s < reset
			// <= 2 s (t=2) and 0 < retry <= 100 ms (Retry-After 1). The
			// daily key holds n × 8.64 s, less the time since the first.
			dailyMax := int64(math.Ceil(float64(admitted) * 8.64))
			dailyMin := int64(math.Ceil(float64(admitted)*8.64 - elapsed.Seconds()))
			daily := func(t int64) string {
				return fmt.Sprintf(`"burst";r=0;t=2, "daily";r=%d;t=%d`, 10000-admitted, t)
			}
			if got := refused.fields["RateLimit"]; !strings.HasPrefix(got, `"burst";r=0;t=2, "daily";`) || !inRange(got, daily, dailyMin, dailyMax) {
				t.Errorf("refusal: RateLimit = %q, want %q with t from %d to %d", got, daily(dailyMax), dailyMin, dailyMax)
			}
			wantRefused := map[string]string{
				"RateLimit-Policy":  wantFirst["RateLimit-Policy"],
				"Retry-After":       "1",
				"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "2",
			}
			for name, want := range wantRefused {
				if got := refused.fields[name]; got != want {
					t.Errorf("refusal: %s = %q, want %q", name, got, want)
				}
			}
			checkProblem(t, refused, 429)
			var body struct {
				Violated []string `json:"violated-policies"`
				Detail   string   `json:"detail"`
			}
			if err := json.Unmarshal(refused.body, &body); err != nil || len(body.Violated) != 1 || body.Violated[0] != "burst" || body.Detail != "Too many requests: retry in 1 s." {
				t.Errorf("refusal body %s (%v): want violated-policies [burst] and detail %q", refused.body, err, "Too many requests: retry in 1 s.")
			}
			firsts[app.name] = first.fields
			refusals[app.name] = refused.fields
		})
	}
	// The same, across the examples that ran (each was checked above
	// against the exact values; this names the pair that differs).
	var ran []string
	for _, app := range exampleApps {
		if firsts[app.name] != nil {
			ran = append(ran, app.name)
		}
	}
	for _, name := range ran[min(1, len(ran)):] {
		for _, f := range fieldNames {
			if a, b := firsts[ran[0]][f], firsts[name][f]; a != b {
				t.Errorf("first request: %s: %s %q, %s %q", f, ran[0], a, name, b)
			}
			if f == "RateLimit" {
				continue // its daily part depends on each run's timing
			}
			if a, b := refusals[ran[0]][f], refusals[name][f]; a != b {
				t.Errorf("refusal: %s: %s %q, %s %q", f, ran[0], a, name, b)
			}
		}
	}
	t.Logf("examples compared: %v", ran)
}

func inRange(got string, format func(int64) string, lo, hi int64) bool {
	for v := max(lo, 0); v <= hi; v++ {
		if got == format(v) {
			return true
		}
	}
	return false
}

func checkProblem(t *testing.T, a answer, status int) {
	t.Helper()
	if a.ctype != "application/problem+json" {
		t.Errorf("%d: Content-Type %q, want application/problem+json", a.status, a.ctype)
	}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(a.body, &p); err != nil || p.Status != status || p.Type == "" || p.Title == "" {
		t.Errorf("problem body %s (%v): want type, title and status %d", a.body, err, status)
	}
}

// TestExamplesServerDown: with nothing listening on the server's port,
// each example answers at once (within 0.5 s, its breaker open after the
// first refused connection): 200 failing open, 503 with --fail-closed.
func TestExamplesServerDown(t *testing.T) {
	for _, app := range exampleApps {
		t.Run(app.name, func(t *testing.T) {
			argv := app.command(t)
			closed := "127.0.0.1:" + strconv.Itoa(freePort(t))
			for _, failClosed := range []bool{false, true} {
				var extra []string
				want := http.StatusOK
				if failClosed {
					extra, want = []string{"--fail-closed"}, http.StatusServiceUnavailable
				}
				p := startExample(t, argv, closed, extra...)
				c := &http.Client{Timeout: 10 * time.Second}
				for i := range 10 {
					a := get(t, c, p.URL+"/hello")
					if a.status != want {
						t.Fatalf("fail-closed %v, request %d: status %d, want %d", failClosed, i+1, a.status, want)
					}
					if a.took > 500*time.Millisecond {
						t.Errorf("fail-closed %v, request %d took %v, want within 0.5 s", failClosed, i+1, a.took)
					}
					if failClosed {
						checkProblem(t, a, want)
					} else if string(a.body) != "hello\n" {
						t.Errorf("request %d: body %q, want hello", i+1, a.body)
					}
				}
			}
		})
	}
}

// limiterVars reads the example's counters from /debug/vars (an example
// may publish more, such as a hit rate, beside the four counters).
func limiterVars(t *testing.T, url string) map[string]int64 {
	t.Helper()
	res, err := http.Get(url + "/debug/vars")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var vars struct {
		Limiter map[string]json.Number `json:"limiter"`
	}
	dec := json.NewDecoder(res.Body)
	dec.UseNumber()
	if err := dec.Decode(&vars); err != nil {
		t.Fatalf("/debug/vars: %v", err)
	}
	counters := make(map[string]int64, 4)
	for _, k := range []string{"decisions", "local", "round_trips", "errors"} {
		v, ok := vars.Limiter[k]
		if !ok {
			t.Fatalf("/debug/vars has no limiter.%s: %v", k, vars.Limiter)
		}
		n, err := v.Int64()
		if err != nil {
			t.Fatalf("/debug/vars limiter.%s = %s: want an integer", k, v)
		}
		counters[k] = n
	}
	return counters
}

// flood sends GET url from conns connections, each its own, for d, and
// returns the admitted and refused counts, the time from the first
// request to the last answer, and every answer's latency.
func flood(t *testing.T, url string, conns int, d time.Duration) (admitted, refused int, elapsed time.Duration, latencies []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			var ok, no int
			var lat []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				res, err := c.Get(url)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				lat = append(lat, time.Since(t0))
				switch res.StatusCode {
				case http.StatusOK:
					ok++
				case http.StatusTooManyRequests:
					no++
				default:
					t.Errorf("flood: status %d", res.StatusCode)
					return
				}
			}
			mu.Lock()
			admitted, refused = admitted+ok, refused+no
			latencies = append(latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return admitted, refused, time.Since(start), latencies
}

// TestExamplesFlood: 6 connections hammer one key for 3 s. Each example
// admits at most the limit (20 + 10 per second), and its deny cache keeps
// at least three in four of the requests from the server.
func TestExamplesFlood(t *testing.T) {
	for _, app := range exampleApps {
		t.Run(app.name, func(t *testing.T) {
			argv := app.command(t)
			s := startServer(t, "--save", "")
			p := startExample(t, argv, s.Addr)
			before := limiterVars(t, p.URL)
			admitted, refused, elapsed, _ := flood(t, p.URL+"/hello", 6, 3*time.Second)
			after := limiterVars(t, p.URL)
			decisions := after["decisions"] - before["decisions"]
			trips := after["round_trips"] - before["round_trips"]
			t.Logf("%s: %d requests in %v (%.0f/s): %d admitted, %d refused; %d decisions, %d local, %d round trips, %d errors",
				app.name, admitted+refused, elapsed, float64(admitted+refused)/elapsed.Seconds(), admitted, refused,
				decisions, after["local"]-before["local"], trips, after["errors"]-before["errors"])
			if limit := 20 + int(10*elapsed.Seconds()) + 1; admitted > limit {
				t.Errorf("%d admitted in %v, above the limit of %d", admitted, elapsed, limit)
			}
			if admitted < 20 {
				t.Errorf("only %d admitted, want at least the burst of 20", admitted)
			}
			if decisions != int64(admitted+refused) {
				t.Errorf("%d decisions counted for %d requests", decisions, admitted+refused)
			}
			if trips*4 > decisions {
				t.Errorf("%d of %d decisions reached the server, want at most a quarter", trips, decisions)
			}
			if e := after["errors"] - before["errors"]; e != 0 {
				t.Errorf("%d errors", e)
			}
		})
	}
}

// TestExamplesFloodFigures measures, for docs/performance.md, each
// example under the flood of TestExamplesFlood with its deny cache on (the
// default) and off (--deny-cache 0): requests per second, median latency
// and round trips. It runs only with CELLSERVER_FIGURES=1:
//
//	CELLSERVER_FIGURES=1 go test -count=1 -run TestExamplesFloodFigures -v ./test
func TestExamplesFloodFigures(t *testing.T) {
	if os.Getenv("CELLSERVER_FIGURES") != "1" {
		t.Skip("set CELLSERVER_FIGURES=1 to measure")
	}
	for _, app := range exampleApps {
		t.Run(app.name, func(t *testing.T) {
			argv := app.command(t)
			for _, cache := range []string{"on", "off"} {
				var extra []string
				if cache == "off" {
					extra = []string{"--deny-cache", "0"}
				}
				s := startServer(t, "--save", "")
				p := startExample(t, argv, s.Addr, extra...)
				before := limiterVars(t, p.URL)
				admitted, refused, elapsed, lat := flood(t, p.URL+"/hello", 6, 3*time.Second)
				after := limiterVars(t, p.URL)
				slices.Sort(lat)
				n := admitted + refused
				trips := after["round_trips"] - before["round_trips"]
				t.Logf("| %s | %s | %.0f | %.2f ms | %d | %d of %d (%.1f%%) | %d |", app.name, cache,
					float64(n)/elapsed.Seconds(), float64(lat[len(lat)/2].Microseconds())/1000, admitted,
					trips, n, 100*float64(trips)/float64(n), after["local"]-before["local"])
			}
		})
	}
}

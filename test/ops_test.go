package test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// Operations and security, end to end with the real binary: TLS and mutual
// TLS (redis-cli and go-redis), maxclients, the query buffer limit,
// maxmemory and the Prometheus endpoint (protected mode and AUTH:
// security_test.go).

// tlsServer starts the binary with the plaintext port and a TLS port.
func tlsServer(t *testing.T, pki *testPKI, authClients string, extra ...string) (*server, int) {
	t.Helper()
	tlsPort := freePort(t)
	args := append([]string{"--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", pki.ServerCert,
		"--tls-key-file", pki.ServerKey, "--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", authClients}, extra...)
	return startServer(t, args...), tlsPort
}

func tlsClient(t *testing.T, port int, tc *tls.Config) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DialTimeout: 5 * time.Second, TLSConfig: tc}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTLS: go-redis and redis-cli over TLS with a client certificate, the
// plaintext port alongside, and clients without a certificate (or with one
// from another CA) refused under tls-auth-clients yes.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	s, tlsPort := tlsServer(t, pki, "yes")
	ctx := context.Background()

	c := tlsClient(t, tlsPort, pki.clientConfig(t, true))
	v, err := c.Do(ctx, "CL.THROTTLE", "user:1", "15", "30", "60").Int64Slice()
	if err != nil || fmt.Sprint(v) != "[0 16 15 -1 2]" {
		t.Fatalf("CL.THROTTLE over TLS = %v, %v; want [0 16 15 -1 2]", v, err)
	}
	// The plaintext port serves the same keyspace at the same time.
	plain := s.client(t, 2)
	if n, err := plain.Exists(ctx, "user:1").Result(); err != nil || n != 1 {
		t.Errorf("EXISTS over plaintext = %d, %v; want 1", n, err)
	}

	// No client certificate, or one from another CA: the handshake fails.
	if err := tlsClient(t, tlsPort, pki.clientConfig(t, false)).Ping(ctx).Err(); err == nil {
		t.Error("PING over TLS without a client certificate succeeded under tls-auth-clients yes")
	}
	other := pki.clientConfig(t, false)
	otherCert, err := tls.LoadX509KeyPair(pki.OtherCert, pki.OtherKey)
	if err != nil {
		t.Fatal(err)
	}
	other.Certificates = []tls.Certificate{otherCert}
	if err := tlsClient(t, tlsPort, other).Ping(ctx).Err(); err == nil {
		t.Error("PING over TLS with a certificate from another CA succeeded")
	}
	// Plaintext on the TLS port is not served either.
	nc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(15 * time.Second))
	nc.Write([]byte("PING\r\n"))
	if line, _ := bufio.NewReader(nc).ReadString('\n'); strings.Contains(line, "PONG") {
		t.Error("plaintext PING answered on the TLS port")
	}

	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	port := strconv.Itoa(tlsPort)
	out, err := exec.Command("redis-cli", "--tls", "--cert", pki.ClientCert, "--key", pki.ClientKey, "--cacert", pki.CAFile,
		"-h", "127.0.0.1", "-p", port, "CL.THROTTLE", "user:2", "15", "30", "60").CombinedOutput()
	if err != nil || strings.Fields(string(out)) == nil || strings.Join(strings.Fields(string(out)), " ") != "0 16 15 -1 2" {
		t.Errorf("redis-cli --tls CL.THROTTLE: %q, %v; want 0 16 15 -1 2", out, err)
	}
	out, err = exec.Command("redis-cli", "--tls", "--cacert", pki.CAFile, "-h", "127.0.0.1", "-p", port, "PING").CombinedOutput()
	if err == nil && strings.Contains(string(out), "PONG") {
		t.Errorf("redis-cli --tls without a certificate answered %q under tls-auth-clients yes", out)
	}
}

// TestTLSOptionalAndTLSOnly: tls-auth-clients optional accepts clients
// without a certificate; --port 0 turns the plaintext port off.
func TestTLSOptionalAndTLSOnly(t *testing.T) {
	pki := newTestPKI(t)
	tlsPort := freePort(t)
	// --port 0 overrides the free port newServer chose: nothing may listen
	// there.
	s := newServer(t, "--port", "0", "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", pki.ServerCert,
		"--tls-key-file", pki.ServerKey, "--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", "optional")
	s.launch()
	ctx := context.Background()
	c := tlsClient(t, tlsPort, pki.clientConfig(t, false))
	poll.Until(t, 15*time.Second, func() error {
		s.failIfExited()
		return c.Ping(ctx).Err()
	})
	if err := tlsClient(t, tlsPort, pki.clientConfig(t, true)).Ping(ctx).Err(); err != nil {
		t.Errorf("PING with a client certificate under optional = %v, want PONG", err)
	}
	if v, err := c.ConfigGet(ctx, "tls-port").Result(); err != nil || v["tls-port"] != strconv.Itoa(tlsPort) {
		t.Errorf("CONFIG GET tls-port = %v, %v; want %d", v, err, tlsPort)
	}
	// As in Redis, port 0 means no plaintext port, whatever listens for TLS.
	if v, err := c.ConfigGet(ctx, "port").Result(); err != nil || v["port"] != "0" {
		t.Errorf("CONFIG GET port = %v, %v; want 0 on a TLS-only server", v, err)
	}
	if nc, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		nc.Close()
		t.Errorf("dial %s succeeded, want nothing listening on a plaintext port under --port 0", s.Addr)
	}
	// The start line names the one listener opened, the TLS one.
	start := regexp.MustCompile(`msg="cellserver started".*`).FindString(s.output.String())
	if !strings.Contains(start, "tls_addr=127.0.0.1:"+strconv.Itoa(tlsPort)) || strings.Contains(start, " addr=") {
		t.Errorf("start line %q, want tls_addr=127.0.0.1:%d and no plaintext addr", start, tlsPort)
	}
}

// TestMaxClientsBinary: the connection beyond maxclients is refused with
// Redis's error and the others keep working.
func TestMaxClientsBinary(t *testing.T) {
	s := startServer(t, "--maxclients", "2")
	ping := func(nc net.Conn, r *bufio.Reader) string {
		t.Helper()
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			return err.Error()
		}
		l, _ := r.ReadString('\n')
		return l
	}
	type client struct {
		nc net.Conn
		r  *bufio.Reader
	}
	var clients []client
	for i := 0; i < 2; i++ {
		// The harness's readiness probe may still count as a client for a
		// moment after it closed: retry a refusal until a deadline.
		poll.Until(t, 10*time.Second, func() error {
			nc, err := net.Dial("tcp", s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			cl := client{nc, bufio.NewReader(nc)}
			l := ping(cl.nc, cl.r)
			if l == "+PONG\r\n" {
				t.Cleanup(func() { nc.Close() })
				clients = append(clients, cl)
				return nil
			}
			nc.Close()
			if l != "-ERR max number of clients reached\r\n" {
				t.Fatalf("client %d PING = %q, want +PONG", i, l)
			}
			return fmt.Errorf("client %d PING = %q, want +PONG", i, l)
		})
	}
	nc, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if l, _ := bufio.NewReader(nc).ReadString('\n'); l != "-ERR max number of clients reached\r\n" {
		t.Errorf("third client got %q, want -ERR max number of clients reached", l)
	}
	for i, cl := range clients {
		if l := ping(cl.nc, cl.r); l != "+PONG\r\n" {
			t.Errorf("client %d PING after the refusal = %q, want +PONG", i, l)
		}
	}
}

// TestQueryBufferLimitBinary: a client sending a never-ending argument is
// closed at client-query-buffer-limit.
func TestQueryBufferLimitBinary(t *testing.T) {
	s := startServer(t, "--client-query-buffer-limit", "1mb")
	nc, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(15 * time.Second))
	nc.Write([]byte("*2\r\n$4\r\nECHO\r\n$100000000\r\n"))
	chunk := make([]byte, 64<<10)
	var werr error
	sent := 0
	for ; sent < 8<<20 && werr == nil; sent += len(chunk) {
		_, werr = nc.Write(chunk)
	}
	if werr == nil {
		// The server must close the connection: a read ends with EOF or a
		// reset, not with the deadline.
		_, err := nc.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
			t.Fatalf("read after 8 MiB with a 1 MiB query buffer limit = %v, want the connection closed", err)
		}
	}
	s.client(t, 2) // the server still serves others
	if !strings.Contains(s.output.String(), "max query buffer length") {
		t.Errorf("no log line for the closed client:\n%s", s.output)
	}
}

// TestMaxMemoryBinary: with noeviction, a new key over maxmemory answers
// OOM; INFO shows the setting.
func TestMaxMemoryBinary(t *testing.T) {
	s := startServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	c := s.client(t, 2)
	// maxmemory is checked every 100 ms: new keys until the check refuses.
	const oom = "OOM command not allowed when used memory > 'maxmemory'."
	i := 0
	poll.Until(t, 10*time.Second, func() error {
		i++
		err := c.Do(ctx, "FW.INCR", "k"+strconv.Itoa(i), "10", "1m").Err()
		if err == nil || err.Error() != oom {
			return fmt.Errorf("FW.INCR on new key k%d = %v, want %s", i, err, oom)
		}
		return nil
	})
	info, err := c.Info(ctx, "memory").Result()
	if f := parseInfo(info); err != nil || f["maxmemory"] != "1" || f["maxmemory_policy"] != "noeviction" {
		t.Errorf("INFO memory = %q, %v; want maxmemory:1 and maxmemory_policy:noeviction", info, err)
	}
}

// TestMetricsEndpoint scrapes /metrics of the binary over HTTP, parses it
// with the Prometheus text parser and checks figures against the commands
// sent.
func TestMetricsEndpoint(t *testing.T) {
	mport := freePort(t)
	s := startServer(t, "--metrics-addr", "127.0.0.1:"+strconv.Itoa(mport), "--save", "3600")
	ctx := context.Background()
	c := s.client(t, 2)
	// Burst 4 (limit 5): 5 allowed, then 3 limited.
	for i := 0; i < 8; i++ {
		if err := c.Do(ctx, "CL.THROTTLE", "m", "4", "1", "60").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		c.Do(ctx, "SL.ADD", "log:"+strconv.Itoa(i), "5", "1h")
	}
	c.Do(ctx, "FW.INCR", "x", "0", "1m") // limit 0: an error
	if err := c.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	get := func(name string, labels ...string) float64 {
		t.Helper()
		f := mf[name]
		if f == nil {
			t.Errorf("%s missing", name)
			return -1
		}
	next:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Errorf("%s%v missing", name, labels)
		return -1
	}
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"cellserver_commands_total", []string{"cmd", "cl.throttle", "outcome", "allowed"}, 5},
		{"cellserver_commands_total", []string{"cmd", "cl.throttle", "outcome", "limited"}, 3},
		{"cellserver_commands_total", []string{"cmd", "sl.add", "outcome", "allowed"}, 3},
		{"cellserver_commands_total", []string{"cmd", "fw.incr", "outcome", "error"}, 1},
		{"cellserver_command_duration_seconds", []string{"cmd", "cl.throttle"}, 8},
		{"cellserver_keys", []string{"kind", "gcra"}, 1},
		{"cellserver_keys", []string{"kind", "sliding-log"}, 3},
		{"cellserver_snapshot_saves_total", nil, 1},
		{"cellserver_snapshot_last_status_ok", nil, 1},
		{"cellserver_snapshot_last_keys", nil, 4},
	}
	for _, tt := range tests {
		if got := get(tt.name, tt.labels...); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if got := get("cellserver_connected_clients"); got < 1 {
		t.Errorf("cellserver_connected_clients = %v, want at least 1", got)
	}
	if got := get("process_open_fds"); got < 3 {
		t.Errorf("process_open_fds = %v", got)
	}
	if got := get("go_goroutines"); got < 3 {
		t.Errorf("go_goroutines = %v", got)
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, lp := range m.Label {
		if lp.GetName() == name && lp.GetValue() == value {
			return true
		}
	}
	return false
}

// TestSlowlogBinary: SLOWLOG with the threshold set on the command line.
func TestSlowlogBinary(t *testing.T) {
	s := startServer(t, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "2")
	ctx := context.Background()
	c := s.client(t, 2)
	for i := 0; i < 3; i++ {
		c.Do(ctx, "CL.THROTTLE", "k"+strconv.Itoa(i), "1", "1", "1")
	}
	v, err := c.Do(ctx, "SLOWLOG", "GET").Slice()
	if err != nil || len(v) != 2 {
		t.Fatalf("SLOWLOG GET = %v, %v; want 2 entries", v, err)
	}
	// The newest entry first: id, time, duration, arguments, address, name.
	entry, ok := v[0].([]any)
	if !ok || len(entry) != 6 {
		t.Fatalf("SLOWLOG GET entry = %v, want 6 fields", v[0])
	}
	args, _ := entry[3].([]any)
	if fmt.Sprint(args) != "[CL.THROTTLE k2 1 1 1]" {
		t.Errorf("newest SLOWLOG entry arguments = %v, want [CL.THROTTLE k2 1 1 1]", args)
	}
}

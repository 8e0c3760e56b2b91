package resp

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/authguard"
	"github.com/cellserver/cellserver/internal/testcert"
	"github.com/cellserver/cellserver/internal/testnet"
	"github.com/cellserver/cellserver/shards"
)

// peerListener accepts real loopback connections but reports, for each,
// the peer address the test queued before dialling: the server's view of
// a client on another host, on a machine that may have no other interface.
type peerListener struct {
	net.Listener
	peers chan net.Addr
}

func (l *peerListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &peerConn{Conn: nc, peer: <-l.peers}, nil
}

type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c *peerConn) RemoteAddr() net.Addr { return c.peer }

// startPeerServer serves a server on a peerListener; dial connects as
// peer.
func startPeerServer(t *testing.T, mutate func(*Config)) (ts *testServer, dial func(peer string) *rawConn) {
	t.Helper()
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.Now = clock.Now
	cfg.Logger = discardLogger()
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := NewServer(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pl := &peerListener{Listener: inner, peers: make(chan net.Addr, 1)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(pl) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	ts = &testServer{srv: srv, addr: inner.Addr().String(), clock: clock, store: store}
	dial = func(peer string) *rawConn {
		t.Helper()
		addr, err := net.ResolveTCPAddr("tcp", peer)
		if err != nil {
			t.Fatal(err)
		}
		pl.peers <- addr
		return ts.raw(t)
	}
	return ts, dial
}

// readAll reads what the server sends until it closes the connection.
func (rc *rawConn) readAll(t *testing.T) string {
	t.Helper()
	_ = rc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(rc.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed within 10s (read %q)", b)
	}
	return string(b)
}

// TestProtectedModeLive: protected mode refuses a client of another host
// while no password is set, deciding with the live requirepass and
// protected-mode of each new connection; clients on this host are never
// refused.
func TestProtectedModeLive(t *testing.T) {
	ts, dial := startPeerServer(t, func(c *Config) { c.RequirePass = "s3cret" })
	admin := dial("127.0.0.1:40000")
	admin.send(t, "AUTH s3cret\r\n")
	if got := admin.line(t); got != "+OK" {
		t.Fatalf("AUTH = %q", got)
	}
	const denied = "-DENIED cellserver is running in protected mode"
	steps := []struct {
		name  string
		set   string // a CONFIG SET on the admin connection first
		peer  string
		allow bool // PING answered (+PONG or NOAUTH); else DENIED and closed
	}{
		{"password set, other host", "", "203.0.113.7:5000", true},
		{"no password, other host", `requirepass ""`, "203.0.113.7:5001", false},
		{"no password, other IPv6 host", "", "[2001:db8::1]:5000", false},
		{"no password, loopback", "", "127.0.0.1:5000", true},
		{"no password, other loopback address", "", "127.0.0.53:5000", true},
		{"no password, IPv6 loopback", "", "[::1]:5000", true},
		{"no password, IPv4-mapped loopback", "", "[::ffff:127.0.0.1]:5000", true},
		{"protected-mode no, other host", "protected-mode no", "203.0.113.7:5002", true},
		{"protected-mode yes again", "protected-mode yes", "203.0.113.7:5003", false},
		{"password set again", "requirepass other", "203.0.113.7:5004", true},
	}
	deniedCount := 0
	for _, st := range steps {
		if st.set != "" {
			admin.send(t, "CONFIG SET "+st.set+"\r\n")
			if got := admin.line(t); got != "+OK" {
				t.Fatalf("%s: CONFIG SET %s = %q", st.name, st.set, got)
			}
		}
		rc := dial(st.peer)
		rc.send(t, "PING\r\n")
		got := rc.line(t)
		if st.allow {
			if got != "+PONG" && !strings.HasPrefix(got, "-NOAUTH") {
				t.Errorf("%s: PING from %s = %q, want an answer", st.name, st.peer, got)
			}
			continue
		}
		deniedCount++
		if !strings.HasPrefix(got, denied) || !strings.Contains(got, "'CONFIG SET protected-mode no'") {
			t.Errorf("%s: PING from %s = %q, want %s...", st.name, st.peer, got, denied)
		}
		if rest := rc.readAll(t); rest != "" {
			t.Errorf("%s: after DENIED the server sent %q, want the connection closed", st.name, rest)
		}
	}
	admin.send(t, "CONFIG SET protected-mode maybe\r\n")
	if got, want := admin.line(t), "-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'"; got != want {
		t.Errorf("CONFIG SET protected-mode maybe = %q, want %q", got, want)
	}
	info := ts.srv.Stats()
	if info.ProtectedModeDenied != int64(deniedCount) || info.RejectedConnections != int64(deniedCount) {
		t.Errorf("Stats: protected-mode denials %d, rejected %d; want %d each", info.ProtectedModeDenied, info.RejectedConnections, deniedCount)
	}
	admin.send(t, "INFO stats\r\n")
	if hdr := admin.line(t); !strings.HasPrefix(hdr, "$") {
		t.Fatalf("INFO header %q", hdr)
	}
	var fields []string
	for {
		l := admin.line(t)
		if l == "" {
			break
		}
		fields = append(fields, l)
	}
	if want := "protected_mode_rejected_connections:" + strconv.Itoa(deniedCount); !contains(fields, want) {
		t.Errorf("INFO stats lacks %q: %q", want, fields)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestProtectedModeRealPeers: the same decision with the real peer
// addresses of a unix socket (on this host: allowed) and of a
// non-loopback interface of this machine (refused), when it has one.
func TestProtectedModeRealPeers(t *testing.T) {
	t.Run("unix socket", func(t *testing.T) {
		srv, err := NewServer(func() Config { c := DefaultConfig(); c.Logger = discardLogger(); return c }(), decide.NewLocal(nil, func() int64 { return t0 }))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "s.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Skipf("no unix sockets: %v", err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(nc, "PING\r\n")
		if l, _ := bufio.NewReader(nc).ReadString('\n'); l != "+PONG\r\n" {
			t.Errorf("PING over a unix socket = %q, want +PONG", l)
		}
	})
	t.Run("non-loopback interface", func(t *testing.T) {
		ip := testnet.NonLoopbackIP()
		if ip == nil {
			t.Skip("no non-loopback interface address")
		}
		srv, err := NewServer(func() Config { c := DefaultConfig(); c.Logger = discardLogger(); return c }(), decide.NewLocal(nil, func() int64 { return t0 }))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			t.Skipf("listen on %s: %v", ip, err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(nc, "PING\r\n")
		got, _ := io.ReadAll(nc)
		if !strings.HasPrefix(string(got), "-DENIED ") {
			t.Errorf("PING from %s = %q, want DENIED and the connection closed", ip, got)
		}
	})
}

// TestAuthFlood: 10,000 wrong passwords pipelined on one connection. The
// connection is closed after authguard.ConnFailures answers, each counted in
// INFO and in one ACL LOG entry; a new connection from the same address
// then waits before its answer, and the right password still works and
// clears the address's record.
func TestAuthFlood(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RequirePass = "s3cret" })
	rc := ts.raw(t)
	_ = rc.SetDeadline(time.Now().Add(60 * time.Second))
	const n = 10000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		payload := strings.Repeat("*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n", n)
		_, _ = rc.Write([]byte(payload)) // fails once the server closes
	}()
	answered := 0
	for {
		l, err := rc.r.ReadString('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection still open after %d answers", answered)
			}
			break
		}
		if l != "-WRONGPASS invalid username-password pair or user is disabled.\r\n" {
			t.Fatalf("answer %d = %q, want WRONGPASS", answered, l)
		}
		answered++
	}
	rc.Close()
	wg.Wait()
	if answered != authguard.ConnFailures {
		t.Errorf("answered %d wrong passwords before the close, want %d", answered, authguard.ConnFailures)
	}
	st := ts.srv.Stats()
	if st.AuthFailures != int64(answered) || st.AuthClosed != 1 {
		t.Errorf("Stats: auth failures %d, closed %d; want %d, 1", st.AuthFailures, st.AuthClosed, answered)
	}

	// A new connection from the same address waits (the address has
	// failed authguard.ConnFailures times: authDelay's maximum).
	again := ts.raw(t)
	start := time.Now()
	again.send(t, "AUTH wrong\r\n")
	if got := again.line(t); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH wrong = %q", got)
	}
	if waited, want := time.Since(start), authguard.Delay(authguard.ConnFailures)/2; waited < want {
		t.Errorf("AUTH on a new connection answered in %v, want at least %v", waited, want)
	}
	answered++

	// The right password works (after its wait), and the counters and the
	// ACL LOG say what happened.
	for _, proto := range []int{2, 3} {
		c := ts.client(t, proto, "s3cret")
		ctx := context.Background()
		info, err := c.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatalf("RESP%d: INFO: %v", proto, err)
		}
		for _, want := range []string{"acl_access_denied_auth:" + strconv.Itoa(answered), "auth_failure_disconnections:1"} {
			if !strings.Contains(info, want+"\r\n") {
				t.Errorf("RESP%d: INFO stats lacks %q", proto, want)
			}
		}
		v, err := c.Do(ctx, "ACL", "LOG").Result()
		if err != nil {
			t.Fatalf("RESP%d: ACL LOG: %v", proto, err)
		}
		entries, ok := v.([]any)
		if !ok || len(entries) != 1 {
			t.Fatalf("RESP%d: ACL LOG = %#v, want one entry", proto, v)
		}
		e := aclFields(t, entries[0])
		want := map[string]any{"count": int64(answered), "reason": "auth", "context": "toplevel", "object": "AUTH", "username": "default", "entry-id": int64(0)}
		for k, w := range want {
			if e[k] != w {
				t.Errorf("RESP%d: ACL LOG entry %s = %#v, want %#v", proto, k, e[k], w)
			}
		}
		if ci, _ := e["client-info"].(string); !strings.Contains(ci, "cmd=auth") || !strings.Contains(ci, "addr=127.0.0.1:") {
			t.Errorf("RESP%d: client-info = %q, want the failing client's line", proto, ci)
		}
		switch age := e["age-seconds"].(type) {
		case float64: // RESP3 double
			if proto != 3 {
				t.Errorf("RESP%d: age-seconds is a double", proto)
			}
		case string: // RESP2 bulk string
			if _, err := strconv.ParseFloat(age, 64); err != nil || proto != 2 {
				t.Errorf("RESP%d: age-seconds = %q", proto, age)
			}
		default:
			t.Errorf("RESP%d: age-seconds = %#v", proto, age)
		}
		if ts.srv.guard.Tracked() != 0 {
			t.Errorf("RESP%d: %d addresses tracked after a successful AUTH, want 0", proto, ts.srv.guard.Tracked())
		}
	}
}

// aclFields reads an ACL LOG entry, a RESP3 map or a RESP2 flat array.
func aclFields(t *testing.T, v any) map[string]any {
	t.Helper()
	out := map[string]any{}
	switch e := v.(type) {
	case map[any]any:
		for k, v := range e {
			out[k.(string)] = v
		}
	case []any:
		if len(e) != 20 {
			t.Fatalf("ACL LOG entry has %d elements, want 20", len(e))
		}
		for i := 0; i < len(e); i += 2 {
			out[e[i].(string)] = e[i+1]
		}
	default:
		t.Fatalf("ACL LOG entry = %#v", v)
	}
	if len(out) != 10 {
		t.Fatalf("ACL LOG entry has fields %v, want 10", out)
	}
	return out
}

// TestACLCommand: ACL LOG's count, RESET and errors, ACL WHOAMI, and the
// grouping of failures by user.
func TestACLCommand(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RequirePass = "s3cret" })
	rc := ts.raw(t)
	for _, user := range []string{"alice", "bob", "alice"} {
		rc.send(t, "AUTH "+user+" guess\r\n")
		if got := rc.line(t); !strings.HasPrefix(got, "-WRONGPASS") {
			t.Fatalf("AUTH %s guess = %q", user, got)
		}
	}
	rc.send(t, "HELLO 3 AUTH default s3cret\r\n")
	if got := rc.line(t); !strings.HasPrefix(got, "%7") {
		t.Fatalf("HELLO 3 AUTH = %q", got)
	}
	c := ts.client(t, 2, "s3cret")
	ctx := context.Background()
	tests := []struct {
		args  []any
		users []string // the entries' users, newest first; nil: an error
		err   string
	}{
		{[]any{"ACL", "LOG"}, []string{"alice", "bob"}, ""},
		{[]any{"ACL", "LOG", "1"}, []string{"alice"}, ""},
		{[]any{"ACL", "LOG", "0"}, []string{}, ""},
		{[]any{"ACL", "LOG", "-1"}, nil, "ERR value is out of range, must be positive"},
		{[]any{"ACL", "LOG", "x"}, nil, "ERR value is not an integer or out of range"},
		{[]any{"ACL", "LOG", "1", "2"}, nil, "ERR wrong number of arguments for 'acl|log' command"},
		{[]any{"ACL", "LOG", "RESET"}, nil, ""},
		{[]any{"ACL", "LOG"}, []string{}, ""},
	}
	for _, tt := range tests {
		v, err := c.Do(ctx, tt.args...).Result()
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err {
				t.Errorf("%v = %v, %v; want error %q", tt.args, v, err, tt.err)
			}
			continue
		case err != nil:
			t.Errorf("%v: %v", tt.args, err)
			continue
		case tt.users == nil:
			if v != "OK" {
				t.Errorf("%v = %#v, want OK", tt.args, v)
			}
			continue
		}
		entries, _ := v.([]any)
		var users []string
		for _, e := range entries {
			f := aclFields(t, e)
			users = append(users, f["username"].(string))
			if f["username"] == "alice" && f["count"] != int64(2) {
				t.Errorf("%v: alice's count = %v, want 2 (grouped)", tt.args, f["count"])
			}
		}
		if strings.Join(users, ",") != strings.Join(tt.users, ",") {
			t.Errorf("%v users = %v, want %v", tt.args, users, tt.users)
		}
	}
	if v, err := c.Do(ctx, "ACL", "WHOAMI").Result(); err != nil || v != "default" {
		t.Errorf("ACL WHOAMI = %v, %v; want default", v, err)
	}
}

// TestConfigSetDuplicate: CONFIG SET refuses a parameter named twice, in
// Redis 7's words, and changes nothing.
func TestConfigSetDuplicate(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	tests := []struct {
		args []any
		err  string
	}{
		{[]any{"maxmemory", "10", "maxmemory", "20"}, "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter"},
		{[]any{"maxmemory", "10", "MAXMEMORY", "20"}, "ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter"},
		{[]any{"timeout", "5", "maxmemory", "10", "timeout", "6"}, "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter"},
		// A bad value after good ones: those are put back.
		{[]any{"timeout", "55", "maxmemory", "10", "maxmemory-policy", "bogus"}, "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - maxmemory-policy: expected noeviction or volatile-ttl, got \"bogus\""},
	}
	for _, tt := range tests {
		err := c.Do(ctx, append([]any{"CONFIG", "SET"}, tt.args...)...).Err()
		if err == nil || err.Error() != tt.err {
			t.Errorf("CONFIG SET %v = %v, want %q", tt.args, err, tt.err)
		}
		got, err := c.ConfigGet(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got["maxmemory"] != "0" || got["timeout"] != "0" {
			t.Errorf("after CONFIG SET %v: maxmemory %q, timeout %q; want both unchanged (0)", tt.args, got["maxmemory"], got["timeout"])
		}
	}
	if err := c.Do(ctx, "CONFIG", "SET", "timeout", "5", "maxmemory", "10").Err(); err != nil {
		t.Fatalf("CONFIG SET of two parameters: %v", err)
	}
	if got := c.ConfigGet(ctx, "*").Val(); got["timeout"] != "5" || got["maxmemory"] != "10" {
		t.Errorf("after CONFIG SET timeout 5 maxmemory 10: timeout %q, maxmemory %q", got["timeout"], got["maxmemory"])
	}
}

// TestProtectedModeTLS: a TLS client of another host is refused the same
// way, over TLS once the handshake is done; a local one is served.
func TestProtectedModeTLS(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	cfg := DefaultConfig()
	cfg.Logger = discardLogger()
	srv, err := NewServer(cfg, decide.NewLocal(nil, func() int64 { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pl := &peerListener{Listener: inner, peers: make(chan net.Addr, 1)}
	ln := tls.NewListener(pl, &tls.Config{Certificates: []tls.Certificate{ca.TLSCert(t, "server", x509.ExtKeyUsageServerAuth)}})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tests := []struct {
		peer string
		want string
	}{
		{"203.0.113.9:4000", "-DENIED cellserver is running in protected mode"},
		{"127.0.0.1:4000", "+PONG"},
	}
	for _, tt := range tests {
		addr, _ := net.ResolveTCPAddr("tcp", tt.peer)
		pl.peers <- addr
		nc, err := tls.Dial("tcp", inner.Addr().String(), &tls.Config{RootCAs: ca.Pool})
		if err != nil {
			t.Fatalf("%s: TLS dial: %v", tt.peer, err)
		}
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(nc, "PING\r\n")
		got, _ := bufio.NewReader(nc).ReadString('\n')
		nc.Close()
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("PING over TLS from %s = %q, want %q...", tt.peer, got, tt.want)
		}
	}
}

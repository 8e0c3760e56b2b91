package test

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testnet"
)

// Security at run time, end to end with the real binary: a pipelined flood
// of wrong passwords, CONFIG SET requirepass "" on loopback, and protected
// mode refusing clients of other hosts per connection.

// TestAuthFloodBinary: 10,000 wrong passwords pipelined on one connection
// get 10 answers and a close; INFO, ACL LOG and the log say so; then
// CONFIG SET requirepass "" opens the server to new loopback clients.
func TestAuthFloodBinary(t *testing.T) {
	s := startServer(t, "--requirepass", "s3cret")
	nc, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(60 * time.Second))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = nc.Write([]byte(strings.Repeat("*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n", 10000))) // fails once closed
	}()
	r := bufio.NewReader(nc)
	answered := 0
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("flood connection still open after %d answers", answered)
			}
			break
		}
		if !strings.HasPrefix(l, "-WRONGPASS ") {
			t.Fatalf("answer %d = %q, want WRONGPASS", answered, l)
		}
		answered++
	}
	nc.Close()
	wg.Wait()
	if answered != 10 {
		t.Errorf("the flood got %d answers before the close, want 10", answered)
	}

	// The address has failed 10 times: this client's AUTH waits (about a
	// second) before it is accepted.
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "s3cret", Protocol: 2, ReadTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	f := parseInfo(info)
	if f["acl_access_denied_auth"] != strconv.Itoa(answered) || f["auth_failure_disconnections"] != "1" {
		t.Errorf("INFO stats: acl_access_denied_auth %q, auth_failure_disconnections %q; want %d, 1",
			f["acl_access_denied_auth"], f["auth_failure_disconnections"], answered)
	}
	v, err := c.Do(ctx, "ACL", "LOG").Slice()
	if err != nil || len(v) != 1 {
		t.Fatalf("ACL LOG = %v, %v; want one entry", v, err)
	}
	entry, _ := v[0].([]any)
	if len(entry) != 20 || entry[0] != "count" || entry[1] != int64(answered) || entry[9] != "default" {
		t.Errorf("ACL LOG entry = %v, want count %d for user default", entry, answered)
	}
	poll.Until(t, 10*time.Second, func() error {
		if out := s.output.String(); !strings.Contains(out, "AUTH failed") {
			return errors.New("no AUTH failed line in the log:\n" + out)
		}
		return nil
	})

	// CONFIG SET requirepass "": new loopback clients need no AUTH
	// (protected mode refuses other hosts only).
	if err := c.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
		t.Fatal(err)
	}
	if got := c.ConfigGet(ctx, "requirepass").Val(); got["requirepass"] != "" {
		t.Errorf(`CONFIG GET requirepass = %q after CONFIG SET requirepass "", want ""`, got["requirepass"])
	}
	got := rawExchange(t, s.Addr, []byte("PING\r\nAUTH x\r\nQUIT\r\n"))
	if want := "+PONG\r\n-ERR AUTH <password> called without any password configured for the default user."; !strings.HasPrefix(got, want) {
		t.Errorf("new loopback client = %q, want %q...", got, want)
	}
}

// TestProtectedMode: on a non-loopback bind without requirepass the server
// starts (with a warning), serves loopback clients, and refuses clients of
// other hosts with DENIED, per connection and with the live settings.
func TestProtectedMode(t *testing.T) {
	s := startServer(t, "--bind", "0.0.0.0")
	poll.Until(t, 10*time.Second, func() error {
		if out := s.output.String(); !strings.Contains(out, "protected mode is on and no password is set") {
			return errors.New("no protected mode warning in the log:\n" + out)
		}
		return nil
	})
	if got := rawExchange(t, s.Addr, []byte("PING\r\nQUIT\r\n")); !strings.HasPrefix(got, "+PONG\r\n") {
		t.Fatalf("loopback PING = %q, want +PONG", got)
	}
	ip := testnet.NonLoopbackIP()
	if ip == nil {
		t.Skip("no non-loopback interface address to connect from")
	}
	other := net.JoinHostPort(ip.String(), strconv.Itoa(s.Port))
	c := s.client(t, 2)
	ctx := ctxT(t)
	steps := []struct {
		set, value string // CONFIG SET from loopback first
		want       string // the reply prefix to PING from the other address
	}{
		{"", "", "-DENIED cellserver is running in protected mode"},
		{"protected-mode", "no", "+PONG"},
		{"protected-mode", "yes", "-DENIED "},
		{"requirepass", "s3cret", "-NOAUTH "},
	}
	for _, st := range steps {
		if st.set != "" {
			if err := c.ConfigSet(ctx, st.set, st.value).Err(); err != nil {
				t.Fatalf("CONFIG SET %s %s: %v", st.set, st.value, err)
			}
		}
		if got := rawExchange(t, other, []byte("PING\r\nQUIT\r\n")); !strings.HasPrefix(got, st.want) {
			t.Errorf("after CONFIG SET %s %q: PING from %s = %q, want %q...", st.set, st.value, ip, got, st.want)
		}
	}
	if got := rawExchange(t, s.Addr, []byte("PING\r\nQUIT\r\n")); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("loopback PING with a password set = %q, want NOAUTH", got)
	}
}

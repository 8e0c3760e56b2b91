package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// transports runs f against a server of each kind of connection: event
// loops and a goroutine per connection.
func transports(t *testing.T, f func(t *testing.T, loops int)) {
	for _, loops := range []int{2, 0} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) { f(t, loops) })
	}
}

func TestClientKill(t *testing.T) {
	transports(t, func(t *testing.T, loops int) {
		ts := startServer(t, func(c *Config) { c.EventLoops = loops })
		a, b := ts.raw(t), ts.raw(t)
		b.send(t, "PING\r\n")
		b.line(t)
		tests := []struct {
			conn *rawConn
			cmd  string
			want string
		}{
			{a, "CLIENT KILL 10.1.2.3:4", "-ERR No such client"},
			{a, "CLIENT KILL ID 0", "-ERR client-id should be greater than 0"},
			{a, "CLIENT KILL TYPE bogus x", "-ERR syntax error"},
			{a, "CLIENT KILL TYPE bogus", "-ERR Unknown client type 'bogus'"},
			{a, "CLIENT KILL TYPE pubsub", ":0"},
			{a, "CLIENT KILL USER someone", ":0"},
			{a, "CLIENT KILL MAXAGE 100", ":0"},
			// Not itself: SKIPME defaults to yes.
			{a, "CLIENT KILL LADDR " + a.RemoteAddr().String() + " ADDR " + a.LocalAddr().String(), ":0"},
			{a, "CLIENT KILL ADDR " + b.LocalAddr().String(), ":1"},
		}
		for _, tt := range tests {
			tt.conn.send(t, tt.cmd+"\r\n")
			if got := tt.conn.line(t); got != tt.want {
				t.Errorf("%s = %q, want %q", tt.cmd, got, tt.want)
			}
		}
		b.expectClosed(t)
		// The old form, and one's own connection after the reply.
		c := ts.raw(t)
		c.send(t, "PING\r\n") // answered: the server has accepted it
		c.line(t)
		a.send(t, "CLIENT KILL "+c.LocalAddr().String()+"\r\n")
		if got := a.line(t); got != "+OK" {
			t.Errorf("CLIENT KILL ip:port = %q, want +OK", got)
		}
		c.expectClosed(t)
		a.send(t, "CLIENT KILL USER default SKIPME no\r\nPING\r\n")
		if got := a.line(t); got != ":1" {
			t.Errorf("CLIENT KILL USER default SKIPME no = %q, want :1", got)
		}
		a.expectClosed(t)
		ts.ping(t)
	})
}

// MAXAGE counts from the connection's start on the server's clock.
func TestClientKillMaxAge(t *testing.T) {
	ts := startServer(t, nil)
	old := ts.raw(t)
	old.send(t, "PING\r\n")
	old.line(t)
	ts.clock.ns.Add(int64(30 * time.Second))
	young := ts.raw(t)
	young.send(t, "CLIENT KILL MAXAGE 20\r\n")
	if got := young.line(t); got != ":1" {
		t.Fatalf("CLIENT KILL MAXAGE 20 = %q, want :1 (the older client)", got)
	}
	old.expectClosed(t)
	young.send(t, "CLIENT LIST\r\n")
	var n int
	if _, err := fmt.Sscanf(young.line(t), "$%d", &n); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(young.r, body); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(body), "\n"); lines != 2 { // one client line, then CRLF
		t.Errorf("CLIENT LIST after the kill = %q, want only this client", body)
	}
}

// Close does not wait for the rest of a long batch of slow commands: the
// connection stops at the next command, on either transport.
func TestCloseStopsBatch(t *testing.T) {
	transports(t, func(t *testing.T, loops int) {
		ts := startServer(t, func(c *Config) { c.EventLoops = loops })
		fillKeys(t, ts.client(t, 2, ""), 50000)
		rc := ts.raw(t)
		const n = 400 // each scans 50,000 keys and matches none
		if _, err := rc.Write(bytes.Repeat([]byte("*2\r\n$4\r\nKEYS\r\n$3\r\nzz*\r\n"), n)); err != nil {
			t.Fatal(err)
		}
		keysCalls := func() int64 {
			for _, cs := range ts.srv.Stats().Commands {
				if cs.Name == "keys" {
					return cs.Calls
				}
			}
			return 0
		}
		poll.Until(t, 30*time.Second, func() error {
			if keysCalls() == 0 {
				return errors.New("no KEYS has run yet")
			}
			return nil
		})
		if err := ts.srv.Close(); err != nil {
			t.Fatal(err)
		}
		if got := keysCalls(); got >= n {
			t.Errorf("%d of %d KEYS ran: Close waited for the whole batch", got, n)
		}
	})
}

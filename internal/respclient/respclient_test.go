package respclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeServer listens on loopback; serve runs on each accepted connection.
func fakeServer(t *testing.T, serve func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer nc.Close(); serve(nc) }()
		}
	}()
	return ln.Addr().String()
}

// replying answers every command read with reply (raw bytes).
func replying(reply string) func(net.Conn) {
	return func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			if _, err := readCommand(r); err != nil {
				return
			}
			if _, err := io.WriteString(nc, reply); err != nil {
				return
			}
		}
	}
}

// readCommand reads one array-of-bulk-strings command.
func readCommand(r *bufio.Reader) ([]string, error) {
	c := &Client{r: r, cfg: Config{}}
	c.cfg.defaults()
	v, err := c.value(0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range v.Elems {
		out = append(out, e.Str)
	}
	return out, nil
}

func TestReplies(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  Value
	}{
		{"simple", "+OK\r\n", Value{Kind: Simple, Str: "OK"}},
		{"error", "-ERR nope\r\n", Value{Kind: Error, Str: "ERR nope"}},
		{"integer", ":-42\r\n", Value{Kind: Integer, Int: -42}},
		{"bulk", "$5\r\nhe\r\no\r\n", Value{Kind: Bulk, Str: "he\r\no"}},
		{"empty bulk", "$0\r\n\r\n", Value{Kind: Bulk, Str: ""}},
		{"null bulk", "$-1\r\n", Value{Kind: Null}},
		{"null array", "*-1\r\n", Value{Kind: Null}},
		{"nested array", "*3\r\n:1\r\n*1\r\n+x\r\n$1\r\ny\r\n", Value{Kind: Array, Elems: []Value{
			{Kind: Integer, Int: 1}, {Kind: Array, Elems: []Value{{Kind: Simple, Str: "x"}}}, {Kind: Bulk, Str: "y"}}}},
		{"empty array", "*0\r\n", Value{Kind: Array, Elems: []Value{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeServer(t, replying(tt.reply))
			c, err := Dial(context.Background(), addr, Config{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := c.Do([]byte("PING"))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Do(PING) with reply %q = %+v, %v; want %+v", tt.reply, got, err, tt.want)
			}
		})
	}
}

func TestBadReplies(t *testing.T) {
	big := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		serve func(net.Conn)
		cfg   Config
		want  error // errors.Is target
	}{
		{"garbage", replying("HTTP/1.1 400 Bad Request\r\n\r\n"), Config{}, ErrProtocol},
		{"no CRLF", replying("+OK\n"), Config{}, ErrProtocol},
		{"bad integer", replying(":12x\r\n"), Config{}, ErrProtocol},
		{"bad length", replying("$-5\r\n"), Config{}, ErrProtocol},
		{"bulk without CRLF", replying("$2\r\nabcd"), Config{}, ErrProtocol},
		{"oversized bulk", replying("$100\r\n" + big + "\r\n"), Config{MaxBulk: 50}, ErrTooLarge},
		{"oversized line", replying("+" + big + "\r\n"), Config{MaxLine: 50}, ErrTooLarge},
		{"endless line", func(nc net.Conn) {
			for {
				if _, err := io.WriteString(nc, big); err != nil {
					return
				}
			}
		}, Config{MaxLine: 4096}, ErrTooLarge},
		{"too many elements", replying("*1000\r\n"), Config{MaxArray: 10}, ErrTooLarge},
		{"too deep", replying(strings.Repeat("*1\r\n", 20) + ":1\r\n"), Config{MaxDepth: 4}, ErrTooLarge},
		{"silent", func(nc net.Conn) { io.Copy(io.Discard, nc) }, Config{Timeout: 200 * time.Millisecond}, os.ErrDeadlineExceeded},
		{"cut", func(nc net.Conn) {
			readCommand(bufio.NewReader(nc))
			io.WriteString(nc, "$10\r\nabc")
		}, Config{}, io.ErrUnexpectedEOF},
		{"trickle", func(nc net.Conn) {
			readCommand(bufio.NewReader(nc))
			// A byte every 50 ms: each read succeeds, the reply as a
			// whole never arrives within the timeout.
			for _, b := range []byte("+" + big + "\r\n") {
				if _, err := nc.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}, Config{Timeout: 500 * time.Millisecond}, os.ErrDeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeServer(t, tt.serve)
			c, err := Dial(context.Background(), addr, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			v, err := c.Do([]byte("PING"))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Do = %+v, %v; want %v", v, err, tt.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Do took %v", d)
			}
			var ioe *IOError
			if isIO := errors.As(err, &ioe); isIO != (tt.want == os.ErrDeadlineExceeded || tt.want == io.ErrUnexpectedEOF) {
				t.Errorf("errors.As(%v, *IOError) = %v", err, isIO)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	got := make(chan []string, 4)
	addr := fakeServer(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			cmd, err := readCommand(r)
			if err != nil {
				return
			}
			got <- cmd
			if cmd[0] == "AUTH" && cmd[len(cmd)-1] != "right" {
				io.WriteString(nc, "-WRONGPASS invalid username-password pair\r\n")
				continue
			}
			io.WriteString(nc, "+OK\r\n")
		}
	})
	c, err := Dial(context.Background(), addr, Config{Username: "u", Password: "right"})
	if err != nil {
		t.Fatalf("Dial with the right password = %v", err)
	}
	c.Close()
	if cmd := <-got; !reflect.DeepEqual(cmd, []string{"AUTH", "u", "right"}) {
		t.Errorf("first command = %q, want AUTH u right", cmd)
	}
	_, err = Dial(context.Background(), addr, Config{Password: "wrong"})
	var re *ReplyError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "WRONGPASS") {
		t.Errorf("Dial with a wrong password = %v, want the WRONGPASS reply", err)
	}
}

func TestDialFailureAndCancel(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	var ioe *IOError
	if _, err := Dial(context.Background(), addr, Config{Timeout: time.Second}); !errors.As(err, &ioe) || ioe.Op != "dial" {
		t.Errorf("Dial of a closed port = %v, want a dial *IOError", err)
	}
	addr = fakeServer(t, func(nc net.Conn) { io.Copy(io.Discard, nc) })
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Dial(ctx, addr, Config{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := c.Do([]byte("PING")); !errors.As(err, &ioe) || time.Since(start) > 30*time.Second {
		t.Errorf("Do after cancel = %v after %v, want a read *IOError soon", err, time.Since(start))
	}
}

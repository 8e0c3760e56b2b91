package resp

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// chunkReader returns its input a few bytes at a time, so that commands
// arrive split at every possible point.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(r.n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// readAll parses every command of input, fed chunk bytes at a time.
func readAll(input string, chunk int) ([][]string, error) {
	rd := newReader(&chunkReader{data: []byte(input), n: chunk}, 1<<20, 1<<10)
	var out [][]string
	for {
		cmds, err := rd.next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		for _, sp := range cmds {
			var args []string
			for _, a := range rd.args[sp.lo:sp.hi] {
				args = append(args, string(a))
			}
			out = append(out, args)
		}
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		in   string
		want [][]string
		err  string
	}{
		{in: "*1\r\n$4\r\nPING\r\n", want: [][]string{{"PING"}}},
		{in: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", want: [][]string{{"ECHO", ""}}},
		{in: "*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n", want: [][]string{{"GET", "a\r\nb"}}},
		{in: "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n", want: [][]string{{"PING"}, {"PING"}}},
		{in: "*0\r\n*1\r\n$1\r\nx\r\n", want: [][]string{{"x"}}}, // empty multibulk skipped, as Redis does
		{in: "PING\r\n", want: [][]string{{"PING"}}},
		{in: "PING\n", want: [][]string{{"PING"}}},
		{in: "\r\n\r\nPING\r\n", want: [][]string{{"PING"}}},
		{in: "  set  a   b \r\n", want: [][]string{{"set", "a", "b"}}},
		{in: `ECHO "a b\x41\n" 'it\'s'` + "\r\n", want: [][]string{{"ECHO", "a bA\n", "it's"}}},
		{in: `ECHO "" ''` + "\r\n", want: [][]string{{"ECHO", "", ""}}},
		{in: `ECHO "abc` + "\r\n", err: "Protocol error: unbalanced quotes in request"},
		{in: `ECHO "abc"def` + "\r\n", err: "Protocol error: unbalanced quotes in request"},
		{in: `ECHO a"b c"` + "\r\n", want: [][]string{{"ECHO", "ab c"}}}, // a quote opening inside a word, as sdssplitargs reads it
		{in: "*x\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*2147483648\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*99999999999999999999999\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*1\r\n$9223372036854775807\r\nx\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$-1\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$x\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$3\r\nabcde\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\nfoo\r\n", err: "Protocol error: expected '$', got 'f'"},
		{in: "*1\n", err: "Protocol error: invalid multibulk length"},
		// Commands before the error are returned first.
		{in: "PING\r\n*1\r\n$x\r\n", want: [][]string{{"PING"}}, err: "Protocol error: invalid bulk length"},
		// Incomplete input at EOF is simply not a command.
		{in: "*2\r\n$3\r\nGET\r\n$3\r\nab", want: nil},
		{in: strings.Repeat("a", maxInlineLen+1), err: "Protocol error: too big inline request"},
		{in: "*" + strings.Repeat("1", maxInlineLen+1), err: "Protocol error: invalid multibulk length"},
		{in: "*1025\r\n", err: "Protocol error: invalid multibulk length"}, // above the test reader's 1024 arguments
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 3, 4096} {
			got, err := readAll(tt.in, chunk)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.err || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("read(%q) in chunks of %d = %q, %q; want %q, %q", tt.in, chunk, got, gotErr, tt.want, tt.err)
			}
		}
	}
}

// TestMalformed sends malformed input over TCP: each gets an error reply
// and a closed connection (or an error reply on a usable connection), and
// the server keeps serving others.
func TestMalformed(t *testing.T) {
	ts := startServer(t, nil)
	tests := []struct {
		name, in, reply string
		closes          bool
	}{
		{"bad bulk length", "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length", true},
		{"huge bulk length", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length", true},
		{"multibulk 2^31", "*2147483648\r\n", "-ERR Protocol error: invalid multibulk length", true},
		{"expected $", "*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'", true},
		{"garbage inline", "\x00\xff\xfe garbage\r\n", "-ERR unknown command '\x00\xff\xfe', with args beginning with: 'garbage' ", false},
		{"unbalanced quotes", "ECHO \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := ts.raw(t)
			rc.send(t, tt.in)
			got := rc.line(t)
			if got != tt.reply {
				t.Errorf("reply = %q, want %q", got, tt.reply)
			}
			if tt.closes {
				rc.expectClosed(t)
			} else {
				rc.send(t, "PING\r\n")
				if got := rc.line(t); got != "+PONG" {
					t.Errorf("after the error, PING = %q", got)
				}
			}
			ts.ping(t)
		})
	}
	t.Run("closed mid-command", func(t *testing.T) {
		rc := ts.raw(t)
		rc.send(t, "*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nke")
		rc.Close()
		ts.ping(t)
	})
	t.Run("never-finished bulk", func(t *testing.T) {
		rc := ts.raw(t)
		rc.send(t, "*1\r\n$100000\r\n"+strings.Repeat("x", 50000))
		ts.ping(t)
	})
}

// TestPipelineOrder sends many mixed commands in one write and checks that
// the replies come back in order, writes batched or not.
func TestPipelineOrder(t *testing.T) {
	ts := startServer(t, nil)
	rc := ts.raw(t)
	const n = 10000
	var in bytes.Buffer
	var want []string
	for i := 0; i < n; i++ {
		switch i % 5 {
		case 0, 1:
			// limit 1000 on one key, T = 1 s: the k-th allowed request
			// leaves 999−k... until exhausted; the fake clock stands still.
			fmt.Fprintf(&in, "*5\r\n$11\r\nCL.THROTTLE\r\n$1\r\np\r\n$3\r\n999\r\n$1\r\n1\r\n$1\r\n1\r\n")
			want = append(want, "*5")
		case 2:
			fmt.Fprintf(&in, "ECHO %d\r\n", i)
			want = append(want, fmt.Sprintf("$%d", len(fmt.Sprint(i))))
		case 3:
			in.WriteString("*2\r\n$11\r\nCL.THROTTLE\r\n$1\r\np\r\n")
			want = append(want, "-ERR wrong number of arguments for 'cl.throttle' command")
		case 4:
			in.WriteString("*2\r\n$3\r\nDEL\r\n$4\r\nnone\r\n")
			want = append(want, ":0")
		}
	}
	go func() { _, _ = rc.Write(in.Bytes()) }()
	allowed := 0
	for i := 0; i < n; i++ {
		got := rc.line(t)
		if got != want[i] {
			t.Fatalf("reply %d = %q, want %q", i, got, want[i])
		}
		switch {
		case got == "*5":
			lim := rc.line(t)
			for j := 0; j < 4; j++ {
				rc.line(t)
			}
			if lim == ":0" {
				allowed++
			}
		case strings.HasPrefix(got, "$"):
			if v := rc.line(t); v != fmt.Sprint(i) {
				t.Fatalf("ECHO reply %d = %q", i, v)
			}
		}
	}
	// 4000 CL.THROTTLE calls against a limit of 1000 at one instant.
	if allowed != 1000 {
		t.Errorf("allowed = %d, want 1000", allowed)
	}
}

// TestIdleTimeout closes a client idle for longer than the timeout.
func TestIdleTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Timeout = 50 * time.Millisecond })
	rc := ts.raw(t)
	rc.send(t, "PING\r\n")
	if got := rc.line(t); got != "+PONG" {
		t.Fatalf("PING = %q", got)
	}
	rc.expectClosed(t)
}

// TestMaxClients refuses connections beyond maxclients with Redis's error.
func TestMaxClients(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxClients = 1 })
	first := ts.raw(t)
	first.send(t, "PING\r\n")
	if got := first.line(t); got != "+PONG" {
		t.Fatalf("first client PING = %q", got)
	}
	second := ts.raw(t)
	if got := second.line(t); got != "-ERR max number of clients reached" {
		t.Errorf("second client got %q", got)
	}
	second.expectClosed(t)
}

// FuzzReader feeds arbitrary bytes to the parser in arbitrary chunks: it
// must never panic, never return more arguments than its limit, and never
// return an argument longer than the bulk limit.
func FuzzReader(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$4\r\nPING\r\n", "PING\r\n", `ECHO "a\x41" 'b\'c'` + "\n", "*2147483648\r\n",
		"*1\r\n$9223372036854775807\r\n", "*1\r\n$-1\r\n", "*-1\r\n", "\x00\xff\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nk",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		rd := newReader(&chunkReader{data: data, n: int(chunk%64) + 1}, 1<<10, 64)
		for i := 0; i < 1000; i++ {
			cmds, err := rd.next()
			if err != nil {
				return
			}
			for _, sp := range cmds {
				if sp.hi-sp.lo > 64 {
					t.Fatalf("command of %d arguments, limit 64", sp.hi-sp.lo)
				}
				for _, a := range rd.args[sp.lo:sp.hi] {
					if len(a) > 1<<10 && len(a) > maxInlineLen {
						t.Fatalf("argument of %d bytes beyond the limits", len(a))
					}
				}
			}
		}
	})
}

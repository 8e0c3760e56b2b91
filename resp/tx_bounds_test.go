package resp

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// Transaction bounds: transaction-max-commands and transaction-max-bytes
// refuse the command past them at queue time, naming the setting, and
// EXEC then answers EXECABORT; EXEC refuses a reply over the output
// buffer's hard limit before anything runs.

func TestTransactionBounds(t *testing.T) {
	thr := func(k string) string { return cmd("CL.THROTTLE", k, "0", "1", "60") }
	key := func(prefix string, n int) string { return prefix + strings.Repeat("k", n-len(prefix)) }
	cases := []struct {
		name    string
		set     []string // CONFIG SET arguments, before MULTI
		queue   []string // commands sent after MULTI
		refused int      // index of the refused command (-1: none)
		text    string   // its error
		exists  string   // a key whose existence after EXEC tells whether it ran
	}{
		{
			name:    "commands at the bound run",
			set:     []string{"transaction-max-commands", "3"},
			queue:   []string{thr("{a}1"), thr("{a}2"), thr("{a}3")},
			refused: -1, exists: "{a}1",
		},
		{
			name:    "one command past the bound",
			set:     []string{"transaction-max-commands", "3"},
			queue:   []string{thr("{b}1"), thr("{b}2"), thr("{b}3"), thr("{b}4"), thr("{b}5")},
			refused: 3, exists: "{b}1",
			text: "-ERR transaction discarded: more than 3 commands queued (transaction-max-commands); split it into smaller transactions or raise the setting",
		},
		{
			// CL.THROTTLE + a 1000-byte key + 0 1 60: 1015 argument bytes.
			name:    "bytes at the bound run",
			set:     []string{"transaction-max-bytes", "2030"},
			queue:   []string{thr(key("{c}1", 1000)), thr(key("{c}2", 1000))},
			refused: -1, exists: key("{c}1", 1000),
		},
		{
			name:    "one byte past the bound",
			set:     []string{"transaction-max-bytes", "2029"},
			queue:   []string{thr(key("{d}1", 1000)), thr(key("{d}2", 1000)), thr("{d}3")},
			refused: 1, exists: key("{d}1", 1000),
			text: "-ERR transaction discarded: more than 2029 bytes queued (transaction-max-bytes); split it into smaller transactions or raise the setting",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, nil)
			rc := ts.raw(t)
			rc.send(t, cmd(append([]string{"CONFIG", "SET"}, tc.set...)...)+cmd("MULTI")+strings.Join(tc.queue, "")+cmd("EXEC"))
			for _, w := range []string{"+OK", "+OK"} {
				if got := rc.reply(t); got != w {
					t.Fatalf("CONFIG SET, MULTI: %s, want %s", got, w)
				}
			}
			for i := range tc.queue {
				want := "+QUEUED"
				if i == tc.refused {
					want = tc.text
				}
				if got := rc.reply(t); got != want {
					t.Fatalf("queued command %d = %s, want %s", i, got, want)
				}
			}
			exec := rc.reply(t)
			switch {
			case tc.refused >= 0 && exec != execAbort:
				t.Fatalf("EXEC = %.80s, want EXECABORT", exec)
			case tc.refused < 0 && !strings.HasPrefix(exec, "["+allowed1):
				t.Fatalf("EXEC = %.80s, want the replies of %d throttles", exec, len(tc.queue))
			}
			rc.send(t, cmd("EXISTS", tc.exists))
			want := ":1"
			if tc.refused >= 0 {
				want = ":0"
			}
			if got := rc.reply(t); got != want {
				t.Fatalf("EXISTS after EXEC = %s, want %s", got, want)
			}
		})
	}
}

// TestTransactionBoundsDropQueue: past a bound the queue is let go of at
// once and later commands are not kept (CLIENT LIST multi=0), yet still
// answered QUEUED, as Redis answers them after a queue-time error.
func TestTransactionBoundsDropQueue(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.TxMaxCommands = 2 })
	rc := ts.raw(t)
	rc.send(t, cmd("MULTI")+cmd("PING")+cmd("PING")+cmd("PING")+cmd("PING"))
	for i, w := range []string{"+OK", "+QUEUED", "+QUEUED",
		"-ERR transaction discarded: more than 2 commands queued (transaction-max-commands); split it into smaller transactions or raise the setting", "+QUEUED"} {
		if got := rc.reply(t); got != w {
			t.Fatalf("reply %d = %s, want %s", i, got, w)
		}
	}
	if line := clientLine(t, ts, rc); !strings.Contains(line, " multi=0 ") || !strings.Contains(line, " multi-mem=0 ") {
		t.Fatalf("CLIENT LIST after the refusal: %s", line)
	}
	rc.send(t, cmd("EXEC"))
	if got := rc.reply(t); got != execAbort {
		t.Fatalf("EXEC = %s, want EXECABORT", got)
	}
}

// TestTransactionReplyBound: EXEC refuses a transaction whose reply is
// estimated over client-output-buffer-limit's hard limit, before any of
// it runs, and the client stays connected; one under it runs.
func TestTransactionReplyBound(t *testing.T) {
	cases := []struct {
		name  string
		limit string
		n     int // CL.THROTTLE commands
		want  string
	}{
		// 100 throttles: 100 × 142 + 16 = 14216 bytes estimated.
		{"over the hard limit", "normal 10kb 0 0", 100, "-ERR transaction discarded: its reply would be about 14216 bytes, over client-output-buffer-limit's hard limit of 10240 bytes; nothing was run: split it into smaller transactions"},
		{"under the hard limit", "normal 20kb 0 0", 100, "["},
		{"no hard limit", "normal 0 0 0", 100, "["},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, nil)
			rc := ts.raw(t)
			var b strings.Builder
			b.WriteString(cmd("CONFIG", "SET", "client-output-buffer-limit", tc.limit) + cmd("MULTI"))
			for i := 0; i < tc.n; i++ {
				b.WriteString(cmd("CL.THROTTLE", "{r}"+strconv.Itoa(i), "0", "1", "60"))
			}
			rc.send(t, b.String())
			for i := 0; i < tc.n+2; i++ {
				if got := rc.reply(t); got != "+OK" && got != "+QUEUED" {
					t.Fatalf("reply %d = %s", i, got)
				}
			}
			rc.send(t, cmd("EXEC"))
			if got := rc.reply(t); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("EXEC = %.200s, want %s", got, tc.want)
			}
			rc.send(t, cmd("EXISTS", "{r}0"))
			want := ":1"
			if tc.want != "[" {
				want = ":0"
			}
			if got := rc.reply(t); got != want {
				t.Fatalf("EXISTS {r}0 after EXEC = %s, want %s (the client still connected)", got, want)
			}
		})
	}
}

// TestConfigSetTransactionBounds: CONFIG SET checks the bounds' values
// against the settings table and CONFIG GET reads them back.
func TestConfigSetTransactionBounds(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	cases := []struct {
		name, value string
		want        string // CONFIG GET after, or the error's text
		ok          bool
	}{
		{"transaction-max-commands", "1", "1", true},
		{"transaction-max-commands", "10000000", "10000000", true},
		{"transaction-max-commands", "0", "argument must be an integer from 1 to 10000000", false},
		{"transaction-max-commands", "10000001", "argument must be an integer from 1 to 10000000", false},
		{"transaction-max-commands", "many", "argument must be an integer from 1 to 10000000", false},
		{"transaction-max-bytes", "1kb", "1024", true},
		{"transaction-max-bytes", "256mb", "268435456", true},
		{"transaction-max-bytes", "1023", "argument must be a memory size from 1kb to 256mb", false},
		{"transaction-max-bytes", "257mb", "argument must be a memory size from 1kb to 256mb", false},
		{"transaction-max-bytes", "lots", "argument must be a memory size from 1kb to 256mb", false},
	}
	for _, tc := range cases {
		before := c.ConfigGet(ctx, tc.name).Val()[tc.name]
		err := c.ConfigSet(ctx, tc.name, tc.value).Err()
		after := c.ConfigGet(ctx, tc.name).Val()[tc.name]
		switch {
		case tc.ok && (err != nil || after != tc.want):
			t.Errorf("CONFIG SET %s %s = %v, then GET %q; want OK, %q", tc.name, tc.value, err, after, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name)):
			t.Errorf("CONFIG SET %s %s = %v; want an error naming %s: %s", tc.name, tc.value, err, tc.name, tc.want)
		case !tc.ok && after != before:
			t.Errorf("CONFIG SET %s %s refused, yet GET %q (was %q)", tc.name, tc.value, after, before)
		}
	}
	d := DefaultConfig()
	if d.TxMaxCommands != DefaultTxMaxCommands || d.TxMaxBytes != DefaultTxMaxBytes {
		t.Errorf("DefaultConfig transaction bounds %d, %d; want %d, %d", d.TxMaxCommands, d.TxMaxBytes, DefaultTxMaxCommands, DefaultTxMaxBytes)
	}
	for _, bad := range []Config{{TxMaxCommands: 0, TxMaxBytes: DefaultTxMaxBytes}, {TxMaxCommands: DefaultTxMaxCommands, TxMaxBytes: 1 << 40}} {
		c := DefaultConfig()
		c.TxMaxCommands, c.TxMaxBytes = bad.TxMaxCommands, bad.TxMaxBytes
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "transaction-max-") {
			t.Errorf("Validate with transaction-max-commands %d, transaction-max-bytes %d = %v; want an error naming the setting", c.TxMaxCommands, c.TxMaxBytes, err)
		}
	}
}

package resp

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/shards"
)

// Fuzz targets for the request path. Each input runs on a fresh server
// through the real connection loop (reader, dispatcher, handlers, reply
// encoder), on an in-memory connection, so that runs are deterministic and
// fast. The properties: nothing panics (the connection loop recovers from
// panics, so the tests fail on the panic log), every command gets a reply,
// and the reply size stays proportional to the input (no amplification,
// no unbounded allocation).
//
//	go test ./resp -run '^$' -fuzz=FuzzConn -fuzztime=5m
//	go test ./resp -run '^$' -fuzz=FuzzCommand -fuzztime=5m
//	go test ./resp -run '^$' -fuzz=FuzzReaderLimits -fuzztime=5m

// memConn is a net.Conn that reads a fixed input, then EOF, and counts
// (and discards) what is written to it.
type memConn struct {
	in      *bytes.Reader
	written int
	out     bytes.Buffer // the first bytes written, for checks
}

func (m *memConn) Read(p []byte) (int, error) { return m.in.Read(p) }
func (m *memConn) Write(p []byte) (int, error) {
	m.written += len(p)
	if m.out.Len() < 1<<16 {
		m.out.Write(p[:min(len(p), 1<<16-m.out.Len())])
	}
	return len(p), nil
}
func (m *memConn) Close() error                     { return nil }
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// panicCatcher fails the test on any log record at error level: the
// connection loop logs a recovered panic there.
type panicCatcher struct{ t testing.TB }

func (p *panicCatcher) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("level=ERROR")) {
		p.t.Errorf("server logged an error: %s", b)
	}
	return len(b), nil
}

// runInput serves input on one connection of a fresh server and returns
// what the server wrote.
func runInput(t testing.TB, input []byte, mutate func(*Config)) *memConn {
	t.Helper()
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Now = clock.Now
	cfg.Logger = newTestLogger(&panicCatcher{t: t})
	// Smaller limits than the defaults keep each run's memory small; the
	// code paths are the same.
	cfg.MaxBulkLen = 1 << 20
	cfg.QueryBufferLimit = 1 << 20
	cfg.Parse.MaxLogLimit = 1000
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := NewServer(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.prepare()
	srv.mu.Unlock()
	mc := &memConn{in: bytes.NewReader(input)}
	srv.startConn(mc)
	srv.wg.Wait() // the connection has read EOF and exited
	srv.Close()
	// Replies are bounded by the input: no command answers more than a
	// fixed amount beyond its arguments (COMMAND DOCS is the largest).
	if limit := 4<<20 + 64*len(input); mc.written > limit {
		t.Errorf("%d bytes of input produced %d bytes of replies (limit %d)", len(input), mc.written, limit)
	}
	return mc
}

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelError}))
}

// FuzzConn feeds arbitrary bytes to a connection.
func FuzzConn(f *testing.F) {
	for _, s := range []string{
		"PING\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"*5\r\n$11\r\nCL.THROTTLE\r\n$4\r\nuser\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n",
		"CL.THROTTLE k 1 1 1\r\nTB.TAKE k 1 1 1\r\nTYPE k\r\nTTL k\r\nPTTL k\r\nGET k\r\n",
		"HELLO 3\r\nCLIENT SETNAME x\r\nCLIENT LIST\r\nCLIENT INFO\r\nINFO all\r\n",
		"SL.ADD a 3 1s 2\r\nSW.INCR b 5 1m\r\nFW.INCR c 5 1h 2\r\nLB.ADD d 5 1 1s\r\nSCAN 0 MATCH * COUNT 5 TYPE sliding-log\r\n",
		"CL.THROTTLEALL a 1 1 1 1 b 2 2 2 2\r\nDEL a b\r\nEXISTS a b\r\nKEYS *\r\nDBSIZE\r\nFLUSHALL\r\n",
		"CONFIG GET *\r\nCONFIG SET slowlog-log-slower-than 0\r\nSLOWLOG GET -1\r\nSLOWLOG LEN\r\nSLOWLOG RESET\r\n",
		"COMMAND COUNT\r\nCOMMAND INFO cl.throttle\r\nCOMMAND DOCS tb.take\r\n",
		"ECHO \"a\\x00b\\r\\n\" 'it\\'s'\r\n",
		"*2\r\n$4\r\nECHO\r\n$-1\r\n",
		"*-1\r\n*0\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\na",
		"*1\r\n$9223372036854775807\r\n",
		"AUTH x\r\nSELECT 1\r\nQUIT\r\nPING\r\n",
		"KEYS *a*a*a*a*a*a*a*a*b\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		runInput(t, input, nil)
	})
}

// commandNames lists every command and subcommand as the words that call
// it ("client setname").
func commandNames(t testing.TB) [][]string {
	t.Helper()
	srv, err := NewServer(DefaultConfig(), decide.NewLocal(nil, func() int64 { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, cmd := range srv.table.all {
		out = append(out, strings.Split(cmd.fullName, "|"))
	}
	return out
}

// encodeCommand writes args as a RESP multibulk command.
func encodeCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// FuzzCommand calls every command of the table with arbitrary arguments:
// which selects the command, data holds the arguments separated by NUL
// bytes (a command runs three times, so that state created by the first
// call is met by the others). The command always gets exactly one reply
// per call, and the connection stays usable (an ECHO follows).
func FuzzCommand(f *testing.F) {
	names := commandNames(f)
	seeds := []string{
		"", "k", "k\x001\x001\x001", "k\x0015\x0030\x0060\x001", "k\x0010\x001\x001s\x005\x00INTERVAL",
		"k\x00-1\x009223372036854775807\x0010y", "*\x00MATCH\x00*\x00COUNT\x001000000000", "0\x00TYPE\x00gcra",
		"k\x001\x001\x001\x001\x00k\x001\x001\x001\x001", "3\x00AUTH\x00default\x00pw\x00SETNAME\x00n",
		"slowlog-max-len\x000", "maxmemory\x001\x00maxmemory-policy\x00volatile-ttl", "-1", "10",
	}
	for i := range names {
		for _, s := range seeds {
			f.Add(uint16(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint16, data []byte) {
		name := names[int(which)%len(names)]
		var args [][]byte
		for _, w := range name {
			args = append(args, []byte(w))
		}
		if len(data) > 0 {
			args = append(args, bytes.Split(data, []byte{0})...)
		}
		var in []byte
		for i := 0; i < 3; i++ {
			in = encodeCommand(in, args)
		}
		// DISCARD ends a transaction MULTI may have started.
		in = append(in, "*1\r\n$7\r\nDISCARD\r\n*2\r\n$4\r\nECHO\r\n$8\r\nfuzz-end\r\n"...)
		mc := runInput(t, in, nil)
		quits := name[0] == "quit" || name[0] == "shutdown"
		if !quits && !bytes.Contains(mc.out.Bytes(), []byte("fuzz-end")) && mc.out.Len() < 1<<16 {
			t.Errorf("%q: the connection did not answer the ECHO that follows; replies: %q", args, mc.out.Bytes())
		}
	})
}

// FuzzReaderLimits parses arbitrary bytes fed in chunks of every size: the
// reader returns commands or an error, never panics, and its buffer stays
// within the query buffer limit.
func FuzzReaderLimits(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n", "PING\r\n", "*2\r\n$1\r\na\r\n$0\r\n\r\n", "\"a\\x41\" 'b'\r\n", "*-1\r\n",
		"*3\r\n$1\r\na\r\n$1\r\nb", "$5\r\nhello\r\n", "*1\r\n$100000\r\n", "*1000000\r\n", "\r\n\r\n\n",
	} {
		f.Add([]byte(s), uint8(1), false)
		f.Add([]byte(s), uint8(7), true)
	}
	f.Fuzz(func(t *testing.T, input []byte, chunk uint8, unauth bool) {
		rd := newReader(&chunkReader{data: input, n: int(chunk%64) + 1}, 1<<16, 1<<10)
		rd.maxQuery = 1 << 16
		rd.unauth = unauth
		for {
			cmds, err := rd.next()
			if err != nil {
				break
			}
			for _, sp := range cmds {
				if sp.lo >= sp.hi || sp.hi > len(rd.args) {
					t.Fatalf("bad span %v of %d args", sp, len(rd.args))
				}
				for _, a := range rd.args[sp.lo:sp.hi] {
					if len(a) > 1<<16 {
						t.Fatalf("argument of %d bytes beyond the bulk limit", len(a))
					}
				}
			}
			if len(rd.buf) > rd.maxQuery+initialReadBuf {
				t.Fatalf("buffer grew to %d, beyond the query limit %d", len(rd.buf), rd.maxQuery)
			}
		}
	})
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// loopbackConns returns the accepting ends of real loopback connections,
// one per source address in from (127.0.0.x addresses: Linux routes all of
// 127/8 to loopback), and the dialing ends, in the same order.
func loopbackConns(t *testing.T, from ...string) (accepted, dialed []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, src := range from {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Skipf("cannot dial from %s: %v", src, err)
		}
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); a.Close() })
		accepted, dialed = append(accepted, a), append(dialed, c)
	}
	return accepted, dialed
}

// closedByPeer reports whether the other end closed c (within 2 s).
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	ne := net.Error(nil)
	return err != nil && !(errors.As(err, &ne) && ne.Timeout()) // EOF, or a reset when bytes were left unread
}

// Admission makes room by closing the oldest handshake that has not sent
// its first message, from the source with the most under way; it refuses
// the newcomer only when every handshake under way has sent its first
// message.
func TestAdmission(t *testing.T) {
	const a, b = "127.0.0.1", "127.0.0.2"
	tests := []struct {
		name    string
		from    []string // sources of the connections, admitted in order
		sent    []int    // of those, the ones that sent their first message before the last arrived
		wrote   []int    // of those, the ones whose bytes wait unread when the last arrives
		max     int
		evicted int // the one closed for the last (-1: none)
		refused bool
	}{
		{"room left", []string{a, b, a}, nil, nil, 3, -1, false},
		{"full: the oldest of the only source", []string{a, a, a}, nil, nil, 2, 0, false},
		{"full: the greediest source, not the newcomer's", []string{a, a, b, b}, nil, nil, 3, 0, false},
		{"full: the newcomer's own source when it is the greediest", []string{a, b, b, b}, nil, nil, 3, 1, false},
		{"full: skips those that sent their first message", []string{a, a, a}, []int{0}, nil, 2, 1, false},
		{"full: skips those whose bytes wait unread", []string{a, a, a}, nil, []int{0}, 2, 1, false},
		{"full: another source when the greediest has sent everything", []string{a, a, b, b}, []int{0, 1}, nil, 3, 2, false},
		{"full, all with bytes waiting: the oldest short of its first message", []string{a, a, a}, nil, []int{0, 1}, 2, 0, false},
		{"full, all sent: refused", []string{a, b, a}, []int{0, 1}, nil, 2, -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc, dialed := loopbackConns(t, tt.from...)
			adm := newAdmission(tt.max)
			var tickets []*hsTicket
			last := len(acc) - 1
			for i, c := range acc[:last] {
				tk := adm.admit(c)
				if tk == nil {
					t.Fatalf("connection %d refused before the last", i)
				}
				tickets = append(tickets, tk)
			}
			for _, i := range tt.sent {
				if !adm.sent(tickets[i]) {
					t.Fatalf("connection %d evicted before the last", i)
				}
			}
			for _, i := range tt.wrote {
				if _, err := dialed[i].Write([]byte{headerRaft}); err != nil {
					t.Fatal(err)
				}
				poll.Until(t, 5*time.Second, func() error {
					if !bytesWaiting(acc[i]) {
						return fmt.Errorf("connection %d: byte not arrived", i)
					}
					return nil
				})
			}
			got := adm.admit(acc[last])
			if refused := got == nil; refused != tt.refused {
				t.Fatalf("last admitted = %v, want refused %v", !refused, tt.refused)
			}
			for i := range tickets {
				evicted := tickets[i].evicted
				if evicted != (i == tt.evicted) {
					t.Errorf("connection %d evicted = %v, want %v", i, evicted, i == tt.evicted)
				}
				if evicted && !closedByPeer(dialed[i]) {
					t.Errorf("evicted connection %d is still open", i)
				}
			}
			st := adm.stats()
			wantEvicted, wantRefused, wantUnderWay := uint64(0), uint64(0), len(acc)
			if tt.evicted >= 0 {
				wantEvicted, wantUnderWay = 1, len(acc)-1
			}
			if tt.refused {
				wantRefused, wantUnderWay = 1, len(acc)-1
			}
			if st.Evicted != wantEvicted || st.RefusedFull != wantRefused || st.Handshakes != wantUnderWay {
				t.Fatalf("stats %+v; want %d evicted, %d refused, %d under way", st, wantEvicted, wantRefused, wantUnderWay)
			}
			// Releasing counts each outcome once; an evicted ticket's
			// release is a no-op.
			for _, tk := range tickets {
				adm.release(tk, hsTimedOut)
			}
			if got != nil {
				adm.release(got, hsAccepted)
			}
			st = adm.stats()
			if st.Handshakes != 0 || st.Accepted != uint64(btoi(got != nil)) || st.TimedOut != uint64(len(tickets))-wantEvicted {
				t.Fatalf("after release: %+v", st)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A flood far larger than the handshake slots (200 connections for 32)
// does not keep a member's dial out: the flood's connections that have
// not sent their first message make room. From another address, the
// flood never touches the member's handshake; from the member's own
// address, a member's connection cannot be told from the flood's until
// its first bytes arrive: a dialer that is slow to write them (a loaded
// machine delays the goroutine between connect and write) can be the
// oldest silent connection by then and be displaced, so a dial may need
// further tries (raft and the forwarding client retry). How many depends
// on the machine's load, so that case is bounded by a deadline, not by a
// count: it fails only if the member's dials stop getting through.
func TestRaftPortFloodBeyondSlots(t *testing.T) {
	tests := []struct {
		name    string
		from    net.IP
		retries bool // a dial may need several tries
	}{
		{"flood from the members' address", net.ParseIP("127.0.0.1"), true},
		{"flood from another address", net.ParseIP("127.0.0.2"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := &security{secret: []byte("s3cret")}
			s, err := newTCPStream("127.0.0.1:0", "", sec, slog.New(slog.DiscardHandler), acceptLimits{timeout: time.Second, max: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			go func() {
				for {
					c, err := s.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			f := startFloodFrom(t, tt.from, s.Addr().String(), 200)
			defer f.Stop()
			poll.Until(t, 30*time.Second, func() error {
				if st := s.handshaking.stats(); st.Evicted < 200 {
					return fmt.Errorf("flood has evicted %d connections, want 200: %+v", st.Evicted, st)
				}
				return nil
			})
			d := &tcpStream{sec: sec, conns: map[net.Conn]struct{}{}}
			retried := 0
			for i := range 20 {
				deadline := time.Now().Add(30 * time.Second)
				for try := 1; ; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					c, err := d.dial(ctx, s.Addr().String(), headerRaft)
					cancel()
					if err == nil {
						c.Close()
						break
					}
					if !tt.retries || time.Now().After(deadline) {
						t.Fatalf("dial %d during the flood, try %d: %v (%+v)", i, try, err, s.handshaking.stats())
					}
					retried++
				}
			}
			t.Logf("20 dials, %d retried", retried)
			t.Logf("raft port after 20 dials: %+v", s.handshaking.stats())
		})
	}
}

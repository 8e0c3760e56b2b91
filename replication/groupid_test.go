package replication

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/internal/poll"
)

// The rule by which the leader judges a node's raft log before it takes a
// place in the group (checkLog): same group, another group, an empty log
// and a log from before group ids, for a member's place and for a new
// member.
func TestCheckLog(t *testing.T) {
	own := &groupIdentity{ID: "aaaa", Index: 5}
	tests := []struct {
		name   string
		own    *groupIdentity
		st     nodeStatus
		member bool
		want   LogMismatch // 0: accepted
	}{
		{"same group, member", own, nodeStatus{GroupID: "aaaa", LastIndex: 40, AppliedIndex: 40}, true, 0},
		{"same group, new member", own, nodeStatus{GroupID: "aaaa", LastIndex: 40, AppliedIndex: 40}, false, 0},
		{"other group, member", own, nodeStatus{GroupID: "bbbb", LastIndex: 4, AppliedIndex: 4}, true, LogOtherGroup},
		{"other group, new member", own, nodeStatus{GroupID: "bbbb", LastIndex: 4, AppliedIndex: 4}, false, LogOtherGroup},
		{"other group, none recorded here yet", nil, nodeStatus{GroupID: "bbbb", LastIndex: 4, AppliedIndex: 4}, true, LogOtherGroup},
		{"empty log, member", own, nodeStatus{}, true, LogEmpty},
		{"empty log, new member", own, nodeStatus{}, false, 0},
		{"pre-group-id log behind the id's entry, member", own, nodeStatus{LastIndex: 9, AppliedIndex: 4}, true, 0},
		{"pre-group-id log behind the id's entry, new member", own, nodeStatus{LastIndex: 9, AppliedIndex: 4}, false, 0},
		{"log without an id past the id's entry, member", own, nodeStatus{LastIndex: 9, AppliedIndex: 5}, true, LogNoGroupID},
		{"log without an id past the id's entry, new member", own, nodeStatus{LastIndex: 90, AppliedIndex: 80}, false, LogNoGroupID},
		{"own log before its first leader recorded an id, member", own, nodeStatus{LastIndex: 2, AppliedIndex: 1, OwnLog: true}, true, LogOwn},
		{"own log before its first leader recorded an id, new member", own, nodeStatus{LastIndex: 2, AppliedIndex: 1, OwnLog: true}, false, LogOwn},
		{"own log, none recorded here yet", nil, nodeStatus{LastIndex: 2, AppliedIndex: 1, OwnLog: true}, true, LogOwn},
		{"pre-group-id log, none recorded here yet", nil, nodeStatus{LastIndex: 9, AppliedIndex: 9}, true, 0},
		{"pre-group-id log, id restored without its index", &groupIdentity{ID: "aaaa"}, nodeStatus{LastIndex: 9, AppliedIndex: 9}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.st.ID = "n1"
			got := checkLog(tt.own, tt.st, tt.member)
			switch {
			case tt.want == 0 && got != nil:
				t.Fatalf("checkLog = %v, want accepted", got)
			case tt.want == 0:
				return
			case got == nil:
				t.Fatalf("checkLog = accepted, want reason %d", tt.want)
			case got.Reason != tt.want || got.Member != tt.member || got.ID != "n1" || got.NodeGroupID != tt.st.GroupID:
				t.Fatalf("checkLog = %+v, want reason %d, member %v, id n1, node's group id %q", got, tt.want, tt.member, tt.st.GroupID)
			}
			if !errors.Is(got, ErrNotGroupLog) || errors.Is(got, ErrIDInUse) != tt.member {
				t.Fatalf("checkLog = %v: errors.Is ErrNotGroupLog %v, ErrIDInUse %v; want true, %v",
					got, errors.Is(got, ErrNotGroupLog), errors.Is(got, ErrIDInUse), tt.member)
			}
		})
	}
}

// handshakeSide is one end of a raft port handshake in
// TestGroupIDHandshake: a node of this version with a group id, or one of
// the version before group ids (old).
type handshakeSide struct {
	groupID string
	old     bool
}

// oldDialAuth and oldAcceptAuth are the handshake of the version before
// group ids: unmarked nonces, MACs over the nonces alone.
func oldDialAuth(c net.Conn, hdr byte, secret []byte) error {
	out := make([]byte, 1+nonceLen)
	out[0] = hdr
	_, _ = rand.Read(out[1:])
	out[1] = 0 // never the mark
	nonce := out[1:]
	if _, err := c.Write(out); err != nil {
		return err
	}
	peer := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, peer); err != nil {
		return err
	}
	if _, err := c.Write(authMAC(secret, labelDial, hdr, peer, nonce)); err != nil {
		return err
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(c, proof); err != nil {
		return err
	}
	if !bytes.Equal(proof, authMAC(secret, labelAccept, hdr, nonce, peer)) {
		return errors.New("bad proof")
	}
	return nil
}

func oldAcceptAuth(c net.Conn, hdr byte, dialerNonce, secret []byte) error {
	nonce := make([]byte, nonceLen)
	_, _ = rand.Read(nonce)
	nonce[0] = 0
	if _, err := c.Write(nonce); err != nil {
		return err
	}
	got := make([]byte, macLen)
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, authMAC(secret, labelDial, hdr, nonce, dialerNonce)) {
		return errBadSecret
	}
	_, err := c.Write(authMAC(secret, labelAccept, hdr, dialerNonce, nonce))
	return err
}

// Raft connections carry each side's group id: two nodes holding two
// groups' logs refuse each other on both sides; a node without one (new,
// or a log from before group ids) talks to any; a node of the version
// before group ids still completes the handshake either way; forwarding
// connections (how groups talk to each other) never compare ids.
func TestGroupIDHandshake(t *testing.T) {
	secret := []byte("s3cret")
	tests := []struct {
		name           string
		hdr            byte
		dialer, accept handshakeSide
		refused        bool
	}{
		{"same group", headerRaft, handshakeSide{groupID: "aaaa"}, handshakeSide{groupID: "aaaa"}, false},
		{"other group", headerRaft, handshakeSide{groupID: "bbbb"}, handshakeSide{groupID: "aaaa"}, true},
		{"new dialer", headerRaft, handshakeSide{}, handshakeSide{groupID: "aaaa"}, false},
		{"new acceptor", headerRaft, handshakeSide{groupID: "aaaa"}, handshakeSide{}, false},
		{"neither has one", headerRaft, handshakeSide{}, handshakeSide{}, false},
		{"dialer of the version before", headerRaft, handshakeSide{old: true}, handshakeSide{groupID: "aaaa"}, false},
		{"acceptor of the version before", headerRaft, handshakeSide{groupID: "aaaa"}, handshakeSide{old: true}, false},
		{"other group on the forwarding service", headerForward, handshakeSide{groupID: "bbbb"}, handshakeSide{groupID: "aaaa"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, a := net.Pipe()
			defer d.Close()
			defer a.Close()
			deadline := time.Now().Add(5 * time.Second)
			_ = d.SetDeadline(deadline)
			_ = a.SetDeadline(deadline)
			acceptErr := make(chan error, 1)
			go func() {
				hdr, nonce, err := readHeader(a, false)
				if err == nil {
					if tt.accept.old {
						err = oldAcceptAuth(a, hdr, nonce, secret)
					} else {
						err = acceptAuth(a, hdr, nonce, secret, tt.accept.groupID)
					}
				}
				if err != nil {
					a.Close()
				}
				acceptErr <- err
			}()
			var dialErr error
			if tt.dialer.old {
				dialErr = oldDialAuth(d, tt.hdr, secret)
			} else {
				dialErr = dialAuth(d, tt.hdr, secret, tt.dialer.groupID)
			}
			aErr := <-acceptErr
			if !tt.refused {
				if dialErr != nil || aErr != nil {
					t.Fatalf("dialer: %v; acceptor: %v; want both accepted", dialErr, aErr)
				}
				return
			}
			for side, err := range map[string]error{"dialer": dialErr, "acceptor": aErr} {
				if !errors.Is(err, errOtherGroupLog) || !strings.Contains(err.Error(), tt.dialer.groupID) || !strings.Contains(err.Error(), tt.accept.groupID) {
					t.Errorf("%s: %v, want a refusal naming both group ids", side, err)
				}
			}
		})
	}
	// A wrong secret is still refused with ids exchanged.
	d, a := net.Pipe()
	defer d.Close()
	defer a.Close()
	go func() {
		if hdr, nonce, err := readHeader(a, false); err == nil {
			_ = acceptAuth(a, hdr, nonce, secret, "aaaa")
		}
		a.Close()
	}()
	if err := dialAuth(d, headerRaft, []byte("guess"), "aaaa"); err == nil {
		t.Fatal("dialAuth with a wrong secret succeeded")
	}
}

// The group id entry: the first recorded is final, snapshots carry it
// with its index, and a snapshot without one (written before group ids)
// leaves the id a replica applied.
func TestGroupIDApplied(t *testing.T) {
	f := newTestFSM(t, nil)
	if got := f.GroupID(); got != "" {
		t.Fatalf("fresh FSM's group id = %q, want none", got)
	}
	f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: encodeGroupIDEntry(1, "aaaa")})
	f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: encodeGroupIDEntry(2, "bbbb")})
	if g := f.groupID.Load(); g == nil || *g != (groupIdentity{ID: "aaaa", Index: 3}) {
		t.Fatalf("group id after two entries = %+v, want aaaa at 3", g)
	}
	if got := f.LastIndex(); got != 9 {
		t.Fatalf("LastIndex = %d, want 9", got)
	}
	snap := func(f *FSM) []byte {
		s, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var sink memSink
		if err := s.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		return sink.Bytes()
	}
	withID := snap(f)
	g := newTestFSM(t, nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(withID))); err != nil {
		t.Fatal(err)
	}
	if got := g.groupID.Load(); got == nil || *got != (groupIdentity{ID: "aaaa", Index: 3}) {
		t.Fatalf("restored group id = %+v, want aaaa at 3", got)
	}
	without := snap(newTestFSM(t, nil))
	if err := g.Restore(io.NopCloser(bytes.NewReader(without))); err != nil {
		t.Fatal(err)
	}
	if got := g.GroupID(); got != "aaaa" {
		t.Fatalf("group id after restoring a snapshot without one = %q, want aaaa kept", got)
	}
}

// Status answers carry the group id; an answer of a node before it decodes
// with none.
func TestStatusGroupID(t *testing.T) {
	for _, st := range []nodeStatus{
		{ID: "n1", Term: 3, LastIndex: 9, AppliedIndex: 8, Group: "g", Instance: 77, GroupID: "aaaa", Member: true},
		{ID: "n1", Term: 2, LastIndex: 2, AppliedIndex: 1, Instance: 78, OwnLog: true, Ready: true},
	} {
		got, err := decodeStatus(encodeStatus(st))
		if err != nil || got != st {
			t.Fatalf("decodeStatus(encodeStatus(%+v)) = %+v, %v", st, got, err)
		}
	}
	st := nodeStatus{ID: "n1", Term: 3, LastIndex: 9, AppliedIndex: 8, Group: "g", Instance: 77}
	b := encodeStatus(st)
	got, err := decodeStatus(b[:len(b)-1]) // without the field at all
	if err != nil || got != st {
		t.Fatalf("decodeStatus(an answer before group ids) = %+v, %v; want %+v", got, err, st)
	}
}

// A LogError crosses the forwarding service with its figures.
func TestLogErrorByCode(t *testing.T) {
	n := &Node{ctx: context.Background()}
	for _, want := range []*LogError{
		{ID: "n1", Addr: "127.0.0.1:7", Reason: LogOtherGroup, GroupID: "aaaa", NodeGroupID: "bbbb", Index: 3, Member: true},
		{ID: "x", Addr: "127.0.0.1:8", Reason: LogNoGroupID, GroupID: "aaaa", Index: 3},
	} {
		code, body := n.svc.errorStatus(fmt.Errorf("wrapped: %w", want))
		err := statusError(code, body)
		var got *LogError
		if !errors.As(err, &got) || *got != *want {
			t.Fatalf("statusError(errorStatus(%+v)) = %#v, want it back", want, err)
		}
		if errors.Is(err, ErrIDInUse) != want.Member {
			t.Fatalf("%v: errors.Is ErrIDInUse = %v, want %v", err, !want.Member, want.Member)
		}
	}
}

// Every member of a group reports one group id, recorded by its first
// leader; a process that bootstrapped a log of its own has another, and
// the leader refuses it both a member's place and a new member's.
func TestOwnLogRefused(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.ClusterSecret = "s3cret" })
	l := c.WaitForLeader(10 * time.Second)
	var group string
	poll.Until(t, 10*time.Second, func() error {
		group = c.nodes[l].node.Info().GroupID
		for _, tn := range c.nodes {
			if got := tn.node.Info().GroupID; got == "" || got != group {
				return fmt.Errorf("%s reports group id %q, the leader %q", tn.id, got, group)
			}
		}
		return nil
	})
	if len(group) != groupIDLen {
		t.Fatalf("group id %q, want %d hex digits", group, groupIDLen)
	}
	f := c.followers(l)[0]
	member := c.nodes[f]
	old := memberAddr(t, c.nodes[l].node, member.id)
	c.stop(f)
	cfg := testConfig(member.id, t.TempDir(), "127.0.0.1:1")
	cfg.ClusterSecret = "s3cret"
	cfg.Bootstrap = true
	lone, _ := startLoneNode(t, cfg)
	poll.Until(t, 10*time.Second, func() error {
		if lone.Info().GroupID == "" {
			return errors.New("the lone node has recorded no group id yet")
		}
		return nil
	})
	other := lone.Info().GroupID
	for _, tt := range []struct {
		id     string
		member bool
	}{{member.id, true}, {"x9", false}} {
		err := c.nodes[l].node.Members().Join(t.Context(), tt.id, lone.RaftAddr(), "127.0.0.1:1")
		var le *LogError
		if !errors.As(err, &le) || le.Reason != LogOtherGroup || le.GroupID != group || le.NodeGroupID != other || le.Member != tt.member {
			t.Fatalf("Join(%s at the lone node) = %v, want a LogError (other group %s, this group %s, member %v)", tt.id, err, other, group, tt.member)
		}
	}
	if got := memberAddr(t, c.nodes[l].node, member.id); got != old {
		t.Fatalf("the leader lists %s at %s, want %s", member.id, got, old)
	}
	if got := memberAddr(t, c.nodes[l].node, "x9"); got != "" {
		t.Fatalf("the leader lists x9 at %s, want no such member", got)
	}
	// The lone node's raft connections to the group are refused.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := lone.stream.dial(ctx, c.nodes[l].raftAddr, headerRaft); !errors.Is(err, errOtherGroupLog) {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("raft connection from the lone node to the leader: %v, want refused for another group's log", err)
	}
	// The member itself, back from its own data: a voter of the group.
	c.restart(f)
	c.waitListed(member.id, old, 15*time.Second)
}

// A data directory written before group ids (a log with a configuration
// and a member's address, no group id entry, no bootstrap mark) restarts
// as before, and its first leader of this version records a group id after
// the old entries: the group upgrades with no step of its own.
func TestLogBeforeGroupIDsGetsOne(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig("n1", dir, "127.0.0.1:1")
	cfg.RaftAddr = addr
	// The old version's raft state, written with raft's own bootstrap.
	ls, err := openLogStore(&cfg, hclog.NewNullLogger(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = "n1"
	_, trans := raft.NewInmemTransport(raft.ServerAddress(addr))
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: raft.ServerAddress(addr)}}}
	if err := raft.BootstrapCluster(rc, ls.logs, ls.stable, snaps, trans, conf); err != nil {
		t.Fatal(err)
	}
	if err := ls.logs.StoreLog(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: encodeMemberEntry(1, "n1", "127.0.0.1:1", false)}); err != nil {
		t.Fatal(err)
	}
	if err := ls.close(); err != nil {
		t.Fatal(err)
	}

	n, _ := startLoneNode(t, cfg)
	poll.Until(t, 15*time.Second, func() error {
		if n.fsm.groupID.Load() == nil {
			return errors.New("no group id recorded yet")
		}
		return nil
	})
	g := n.fsm.groupID.Load()
	if len(g.ID) != groupIDLen || g.Index <= 2 {
		t.Fatalf("group id %+v, want %d hex digits recorded after the old entries (index > 2)", g, groupIDLen)
	}
	if st := n.mship.status("x"); st.GroupID != g.ID || st.OwnLog {
		t.Fatalf("status: group id %q, own log %v; want %q, false (the log was not bootstrapped by this version)", st.GroupID, st.OwnLog, g.ID)
	}
	if addr, ok := n.fsm.member("n1"); !ok || addr != "127.0.0.1:1" {
		t.Fatalf("member n1's RESP address from the old log = %q, %v", addr, ok)
	}
	// Restarted, it has the id from its stable store before it applies
	// anything (what it reports and presents until then).
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := startLoneNode(t, cfg)
	if p := again.gid.stored.Load(); p == nil || *p != g.ID || again.gid.groupID() != g.ID {
		t.Fatalf("restarted node: stored group id %v, group id %q; want %q", p, again.gid.groupID(), g.ID)
	}
}

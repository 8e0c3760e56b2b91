package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// TestMayTakeSlot: which groups the routing model rules out as holders of
// a slot's key (CLUSTER ABORTMOVE's question). Group a (Self) owns 0-99;
// b owns 100-199 and imports 7 from a; c owns 200-16383; d owns nothing;
// e owns nothing and its view is stale; f has no member.
func TestMayTakeSlot(t *testing.T) {
	m := func(id string) []GroupMember {
		return []GroupMember{{ID: id, ClusterID: "id" + id, RespAddr: "h:" + id}}
	}
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{0, 99}}, Reachable: true, Members: m("1"), Migrating: map[int]string{7: "b"}},
		{Name: "b", Slots: [][2]int{{100, 199}}, Reachable: true, Members: m("2"), Importing: map[int]string{7: "a"}},
		{Name: "c", Slots: [][2]int{{200, 16383}}, Reachable: true, Members: m("3")},
		{Name: "d", Reachable: true, Members: m("4")},
		{Name: "e", Members: m("5")},
		{Name: "f", Reachable: true},
	})
	tests := []struct {
		g, slot int
		want    bool
	}{
		{1, 150, true},   // b owns it
		{1, 7, true},     // b imports it
		{3, 7, true},     // d owns nothing, but slot 7 is importing somewhere
		{3, 8, false},    // d neither owns nor imports, and nobody imports 8
		{2, 8, false},    // c owns other slots
		{2, 300, true},   // c owns 300
		{4, 8, true},     // e's view is stale
		{5, 8, true},     // f has no member to ask
		{9, 8, true},     // unknown group
		{3, -1, true},    // slot out of range
		{3, 16384, true}, // slot out of range
	}
	for _, tc := range tests {
		if got := r.MayTakeSlot(tc.g, tc.slot); got != tc.want {
			t.Errorf("MayTakeSlot(%s, %d) = %v, want %v", name(r, tc.g), tc.slot, got, tc.want)
		}
	}
	// Self importing a slot from another group: any group may hold it.
	r2 := NewRouting(0, "a1", []GroupView{
		{Name: "a", Reachable: true, Members: m("1"), Importing: map[int]string{9: "b"}},
		{Name: "b", Reachable: true, Members: m("2")},
	})
	if !r2.MayTakeSlot(1, 9) {
		t.Errorf("MayTakeSlot(b, 9) = false while a imports 9, want true")
	}
}

func name(r *Routing, g int) string {
	if g >= 0 && g < len(r.Groups) {
		return r.Groups[g].Name
	}
	return "?"
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestApplyMove: the lease's rules at apply time, as every replica
// applies them.
func TestApplyMove(t *testing.T) {
	s := NewState()
	take := func(h string, lease, now int64) error {
		return s.ApplyMove(&Change{Action: TakeMove, Holder: h, Lease: lease}, now)
	}
	drop := func(h string, now int64) { s.ApplyMove(&Change{Action: DropMove, Holder: h}, now) }
	steps := []struct {
		name   string
		do     func() error
		busy   bool
		holder string
		until  int64
	}{
		{"free: a takes it", func() error { return take("a", 10, 100) }, false, "a", 110},
		{"b while a holds it", func() error { return take("b", 10, 105) }, true, "a", 110},
		{"a renews", func() error { return take("a", 10, 108) }, false, "a", 118},
		{"b's drop is ignored", func() error { drop("b", 109); return nil }, false, "a", 118},
		{"b once a's lapsed", func() error { return take("b", 5, 118) }, false, "b", 123},
		{"a's late drop is ignored", func() error { drop("a", 119); return nil }, false, "b", 123},
		{"b drops it", func() error { drop("b", 120); return nil }, false, "", 0},
		{"a takes the free lease", func() error { return take("a", 1, 121) }, false, "a", 122},
	}
	for _, st := range steps {
		err := st.do()
		var mb *MoveBusyError
		if got := errors.As(err, &mb); got != st.busy || (err != nil && !errors.Is(err, ErrMoveBusy)) {
			t.Errorf("%s: err = %v, want busy %v", st.name, err, st.busy)
		}
		if st.busy && mb.Holder != st.holder {
			t.Errorf("%s: refusal names %q, want %q", st.name, mb.Holder, st.holder)
		}
		if s.Lease.Holder != st.holder || s.Lease.Until != st.until {
			t.Errorf("%s: lease = %+v, want %s until %d", st.name, s.Lease, st.holder, st.until)
		}
	}
	// Other actions leave the lease alone; Clone keeps it.
	s.Apply(&Change{Action: AddSlots, Ranges: [][2]int{{0, 1}}}, "g")
	if c := s.Clone(); c.Lease != s.Lease || s.Lease.Holder != "a" {
		t.Errorf("after AddSlots and Clone: lease %+v, clone %+v", s.Lease, c.Lease)
	}
}

// TestMoverSerialises: moves of two Movers over one log (two nodes of a
// group) never overlap, the second waits for the first, and a move that
// waits too long is refused without running.
func TestMoverSerialises(t *testing.T) {
	log := NewLocalMoves(nil)
	m1, m2 := NewMover(log, "n1"), NewMover(log, "n2")
	ctx := context.Background()
	var running, overlaps, ran atomic.Int32
	move := func(m *Mover) error {
		return m.Run(ctx, time.Minute, 30*time.Second, func() error {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			ran.Add(1)
			time.Sleep(time.Millisecond) // a move's work, so that others try meanwhile
			running.Add(-1)
			return nil
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		m := m1
		if i%2 == 1 {
			m = m2
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs <- move(m) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}
	if overlaps.Load() != 0 || ran.Load() != 40 {
		t.Errorf("40 moves: %d ran, %d overlapped; want 40 and 0", ran.Load(), overlaps.Load())
	}

	// A move still running past the other's wait: the other is refused
	// and does not run.
	held := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- m1.Run(ctx, time.Minute, time.Second, func() error { <-held; return nil })
	}()
	poll.Until(t, 10*time.Second, func() error {
		if log.TakeMove(ctx, "probe", time.Nanosecond) == nil {
			log.DropMove(ctx, "probe")
			return errors.New("m1 does not hold the lease yet")
		}
		return nil
	})
	err := m2.Run(ctx, time.Minute, 50*time.Millisecond, func() error {
		t.Error("m2's move ran while m1 held the lease")
		return nil
	})
	if !errors.Is(err, ErrMoveBusy) {
		t.Errorf("m2.Run while m1 holds the lease = %v, want ErrMoveBusy", err)
	}
	close(held)
	if err := <-done; err != nil {
		t.Errorf("m1.Run = %v", err)
	}
	// Dropped: m2 runs now.
	if err := m2.Run(ctx, time.Minute, 0, func() error { return nil }); err != nil {
		t.Errorf("m2.Run after m1's drop = %v", err)
	}
}

// TestMoverLeaseLapses: a holder that never drops its lease (its node
// died mid-move) blocks others only until the lease lapses.
func TestMoverLeaseLapses(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	log := NewLocalMoves(clk.now)
	ctx := context.Background()
	if err := log.TakeMove(ctx, "dead/1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m := NewMover(log, "n2")
	ran := false
	if err := m.Run(ctx, time.Minute, 0, func() error { ran = true; return nil }); !errors.Is(err, ErrMoveBusy) || ran {
		t.Errorf("Run before the lease lapses = %v (ran %v), want ErrMoveBusy", err, ran)
	}
	clk.advance(10 * time.Second)
	wantErr := errors.New("move failed")
	if err := m.Run(ctx, time.Minute, 0, func() error { ran = true; return wantErr }); err != wantErr || !ran {
		t.Errorf("Run once the lease lapsed = %v (ran %v), want fn's error", err, ran)
	}
	// fn's failure still dropped the lease.
	if err := log.TakeMove(ctx, "n3/1", time.Second); err != nil {
		t.Errorf("TakeMove after a failed move = %v, want the lease free", err)
	}
}

// countingLog is a MoveLog that counts the TakeMove calls reaching the
// log below it.
type countingLog struct {
	MoveLog
	takes atomic.Int32
}

func (c *countingLog) TakeMove(ctx context.Context, holder string, lease time.Duration) error {
	c.takes.Add(1)
	return c.MoveLog.TakeMove(ctx, holder, lease)
}

// TestMoverWaitsWithoutAsking: a Mover waiting for another's lease asks
// the log once, then watches the lease its replica applies, and asks
// again only once it is released: a wait of any length writes two
// entries (the refusal, the take), not one per retry.
func TestMoverWaitsWithoutAsking(t *testing.T) {
	local := NewLocalMoves(nil)
	log := &countingLog{MoveLog: local}
	ctx := context.Background()
	if err := local.TakeMove(ctx, "other/1", time.Minute); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- NewMover(log, "n2").Run(ctx, time.Minute, time.Minute, func() error { return nil })
	}()
	poll.Until(t, 10*time.Second, func() error {
		if log.takes.Load() == 0 {
			return errors.New("the mover has not asked yet")
		}
		return nil
	})
	// Held for a while: a mover retrying every 200 ms at most would ask
	// several times meanwhile.
	time.Sleep(time.Second)
	if n := log.takes.Load(); n != 1 {
		t.Errorf("%d TakeMove calls while the lease was held, want 1 (the refusal)", n)
	}
	if err := local.DropMove(ctx, "other/1"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after the release = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still waiting 30 s after the lease was released")
	}
	if n := log.takes.Load(); n != 2 {
		t.Errorf("%d TakeMove calls in all, want 2 (the refusal, the take)", n)
	}
}

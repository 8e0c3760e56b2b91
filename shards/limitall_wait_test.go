package shards

import (
	"errors"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// waiting returns req with a wait of d.
func waiting(req engine.Request, d time.Duration) engine.Request {
	req.Wait = int64(d)
	return req
}

// peekAll returns what a peek (quantity 0) of each key answers at now.
func peekAll(t *testing.T, s *Store, keys []string, req engine.Request, now int64) []engine.Result {
	t.Helper()
	req.Quantity = 0
	var out []engine.Result
	for _, k := range keys {
		out = append(out, exec(t, s, limitOp(k, req), now)[0])
	}
	return out
}

// CL.THROTTLEALL … WAIT: the op is admitted at one instant, the largest of
// its refusals' retry_after ahead, every key reserved as if the op arrived
// then; or refused at once, consuming nothing.
func TestLimitAllWait(t *testing.T) {
	perA := gcra(0, 10, time.Second, 1) // one per 100 ms
	perB := gcra(0, 5, time.Second, 1)  // one per 200 ms
	two := gcra(1, 10, time.Second, 1)  // two at once, then one per 100 ms
	cases := []struct {
		name string
		// head is taken at t0 (without waiting), then op at t0.
		head  *Op
		op    *Op
		delay time.Duration // the op's admission; -1: refused
	}{
		{"free keys answer at once",
			nil, limitAllOp([]string{"a", "b"}, waiting(perA, time.Second), waiting(perB, time.Second)), 0},
		{"the later key sets the instant",
			limitAllOp([]string{"a", "b"}, perA, perB),
			limitAllOp([]string{"a", "b"}, waiting(perA, time.Second), waiting(perB, time.Second)), 200 * time.Millisecond},
		{"one refusal enough to wait",
			limitAllOp([]string{"b"}, perB),
			limitAllOp([]string{"a", "b"}, waiting(perA, time.Second), waiting(perB, time.Second)), 200 * time.Millisecond},
		{"within the wait only",
			limitAllOp([]string{"a", "b"}, perA, perB),
			limitAllOp([]string{"a", "b"}, waiting(perA, 150*time.Millisecond), waiting(perB, 150*time.Millisecond)), -1},
		{"the smallest wait counts",
			limitAllOp([]string{"a", "b"}, perA, perB),
			limitAllOp([]string{"a", "b"}, waiting(perA, time.Second), waiting(perB, 150*time.Millisecond)), -1},
		{"no wait on one request, no waiting",
			limitAllOp([]string{"a", "b"}, perA, perB),
			limitAllOp([]string{"a", "b"}, waiting(perA, time.Second), perB), -1},
		{"a key named twice needs both units",
			limitAllOp([]string{"k", "k"}, two, two),
			limitAllOp([]string{"k", "k"}, waiting(two, time.Second), waiting(two, time.Second)), 200 * time.Millisecond},
		{"never enough for both",
			limitAllOp([]string{"a"}, perA),
			limitAllOp([]string{"a", "a"}, waiting(perA, 10*time.Second), waiting(perA, 10*time.Second)), -1},
		{"more than the burst",
			nil, limitAllOp([]string{"a", "b"}, waiting(gcra(0, 10, time.Second, 2), time.Second), waiting(perB, time.Second)), -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ref := newStore(t, 4), newStore(t, 4)
			if c.head != nil {
				exec(t, s, c.head, t0)
				exec(t, ref, c.head, t0)
			}
			got := exec(t, s, c.op, t0)
			keys := make([]string, len(c.op.Keys))
			plain := &Op{Code: OpLimitAll, Keys: c.op.Keys}
			for i := range c.op.Reqs {
				keys[i] = string(c.op.Keys[i])
				r := c.op.Reqs[i]
				r.Wait = 0
				plain.Reqs = append(plain.Reqs, r)
			}
			if c.delay < 0 {
				// Refused at once: the replies and the state are those
				// of the op without WAIT.
				want := exec(t, ref, plain, t0)
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("result %d = %+v, want the refusal without WAIT %+v", i+1, got[i], want[i])
					}
				}
				if !anyLimited(got) {
					t.Errorf("results %+v, want refused", got)
				}
			} else {
				// Admitted: the replies and the state are those of the op
				// arriving at its turn, every reply due then.
				at := t0 + int64(c.delay)
				want := exec(t, ref, plain, at)
				for i := range got {
					w := want[i]
					w.Delay = int64(c.delay)
					if got[i] != w {
						t.Errorf("result %d = %+v, want %+v (the op at +%v)", i+1, got[i], w, c.delay)
					}
				}
			}
			for _, at := range []int64{t0, t0 + int64(max(c.delay, 0)), t0 + int64(time.Second)} {
				g, w := peekAll(t, s, keys, perA, at), peekAll(t, ref, keys, perA, at)
				for i := range g {
					if g[i] != w[i] {
						t.Errorf("peek of %s at +%v = %+v, want %+v", keys[i], time.Duration(at-t0), g[i], w[i])
					}
				}
			}
		})
	}
}

func anyLimited(rs []engine.Result) bool {
	for _, r := range rs {
		if r.Limited {
			return true
		}
	}
	return false
}

// A shadow request's refusal never makes the op wait, nor is it counted
// more than once however many instants the op tries; a key of another
// kind fails a waiting op as any other.
func TestLimitAllWaitShadowAndWrongType(t *testing.T) {
	s := newStore(t, 4)
	perA := gcra(0, 10, time.Second, 1)
	perB := gcra(0, 5, time.Second, 1)
	exec(t, s, limitAllOp([]string{"a", "b"}, perA, perB), t0)
	shadowA := waiting(perA, time.Second)
	shadowA.Shadow = true

	got := exec(t, s, limitAllOp([]string{"a", "c"}, shadowA, waiting(perB, time.Second)), t0)
	if got[0].Limited || !got[0].Shadowed || got[1].Limited || got[0].Delay != 0 || got[1].Delay != 0 {
		t.Errorf("shadow refusal and a free key = %+v, want allowed at once", got)
	}
	if n := s.Shadowed(); n != 1 {
		t.Errorf("Shadowed() = %d, want 1", n)
	}
	// b waits 200 ms; at that instant a's shadow request is allowed for
	// real, and the refusal at now is not counted.
	got = exec(t, s, limitAllOp([]string{"a", "b"}, shadowA, waiting(perB, time.Second)), t0)
	if got[1].Limited || got[1].Delay != int64(200*time.Millisecond) || got[0].Delay != got[1].Delay {
		t.Errorf("shadow request beside a waiting one = %+v, want both due at +200ms", got)
	}
	if n := s.Shadowed(); n != 1 || got[0].Shadowed {
		t.Errorf("Shadowed() = %d (result %+v), want still 1", n, got[0])
	}

	exec(t, s, limitOp("w", fw(1, time.Second, 1)), t0)
	var res Result
	s.Exec(limitAllOp([]string{"a", "w"}, waiting(perA, time.Second), waiting(perA, time.Second)), t0, &res)
	if !errors.Is(res.Err, ErrWrongType) {
		t.Errorf("waiting op on a key of another kind = %v, want ErrWrongType", res.Err)
	}
}

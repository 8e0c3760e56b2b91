package httplimit

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestParseOddReplies feeds the reply parser what a broken or foreign
// server might answer: every one is ErrBadReply, none panics.
func TestParseOddReplies(t *testing.T) {
	one, err := compileAll([]Policy{{Name: "p", Burst: 1, Count: 1, Period: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	two, err := compileAll([]Policy{{Name: "a", Burst: 1, Count: 1, Period: time.Second}, {Name: "b", Burst: 1, Count: 1, Period: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := compileAll([]Policy{{Name: "p", Algorithm: TokenBucket, Burst: 1, Count: 1, Period: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	good := []any{int64(0), int64(2), int64(1), int64(-1), int64(1)}
	for _, tc := range []struct {
		name     string
		policies []compiled
		reply    any
	}{
		{"nil", one, nil},
		{"string", one, "OK"},
		{"integer", one, int64(1)},
		{"short array", one, []any{int64(0), int64(2), int64(1), int64(-1)}},
		{"string field", one, []any{int64(0), "2", int64(1), int64(-1), int64(1)}},
		{"nil field", one, []any{int64(0), int64(2), nil, int64(-1), int64(1)}},
		{"limited 2", one, []any{int64(2), int64(2), int64(1), int64(-1), int64(1)}},
		{"negative limit", one, []any{int64(0), int64(-2), int64(1), int64(-1), int64(1)}},
		{"negative remaining", one, []any{int64(0), int64(2), int64(-1), int64(-1), int64(1)}},
		{"remaining above limit", one, []any{int64(0), int64(2), int64(3), int64(-1), int64(1)}},
		{"retry below -1", one, []any{int64(1), int64(2), int64(0), int64(-2), int64(1)}},
		{"allowed with a retry", one, []any{int64(0), int64(2), int64(0), int64(5), int64(1)}},
		{"negative reset", one, []any{int64(0), int64(2), int64(1), int64(-1), int64(-1)}},
		{"seconds overflowing a Duration", one, []any{int64(1), int64(2), int64(0), int64(math.MaxInt64 / 2), int64(1)}},
		{"milliseconds overflowing a Duration", ms, []any{int64(0), int64(1), int64(0), int64(-1), int64(math.MaxInt64 / 1000)}},
		{"one reply for several", two, good},
		{"too few replies", two, []any{good}},
		{"too many replies", two, []any{good, good, good}},
		{"a bad reply among several", two, []any{good, []any{int64(0)}}},
		{"not an array of arrays", two, []any{int64(1), int64(2)}},
	} {
		l := &Limiter{policies: tc.policies}
		d, err := l.parse(tc.reply)
		if !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: parse(%v) = %+v, %v; want ErrBadReply", tc.name, tc.reply, d, err)
		}
	}
	// And the good ones parse, the LB.ADD sixth integer ignored.
	l := &Limiter{policies: one}
	if d, err := l.parse(append(append([]any(nil), good...), int64(0))); err != nil || !d.Allowed || d.Results[0].ResetAfter != time.Second {
		t.Errorf("parse(good) = %+v, %v", d, err)
	}
	l = &Limiter{policies: two}
	if d, err := l.parse([]any{good, good}); err != nil || !d.Allowed || len(d.Results) != 2 {
		t.Errorf("parse(good, good) = %+v, %v", d, err)
	}
}

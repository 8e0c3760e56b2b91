package snapshot

import (
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// TestWindowReservationStates: the states the window limiters write for
// waiting requests (engine/wait.go: a fixed or sliding window dated in a
// later window, a sliding log with entries dated after now and more than
// limit units) pass ValidateState and survive DUMP and RESTORE unchanged,
// so a snapshot, a replica and MIGRATE carry every place in line.
func TestWindowReservationStates(t *testing.T) {
	now := int64(1_795_305_600_123_456_789)
	for _, kind := range []engine.Kind{engine.KindFixedWindow, engine.KindSlidingWindow, engine.KindSlidingLog} {
		t.Run(kind.String(), func(t *testing.T) {
			req := engine.Request{Kind: kind, Burst: 3, Period: int64(100 * time.Millisecond), Quantity: 2, Wait: int64(2 * time.Second)}
			var st engine.State
			waited := 0
			for range 6 {
				var res engine.Result
				st, res = engine.Apply(st, &req, now)
				if res.Limited {
					t.Fatalf("a waiter with WAIT 2s was refused: %+v", res)
				}
				if res.Delay > 0 {
					waited++
				}
			}
			if waited == 0 {
				t.Fatalf("no request waited: the states under test were not written")
			}
			if err := ValidateState(&st); err != nil {
				t.Fatalf("ValidateState(%+v) = %v", st, err)
			}
			got, err := DecodeDump(EncodeDump(&st))
			if err != nil {
				t.Fatalf("DecodeDump(EncodeDump(%+v)) = %v", st, err)
			}
			if !reflect.DeepEqual(got, st) {
				t.Fatalf("round trip: %+v, want %+v", got, st)
			}
		})
	}
}

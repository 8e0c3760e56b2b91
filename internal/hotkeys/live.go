package hotkeys

import (
	"strconv"
	"sync/atomic"

	"github.com/cellserver/cellserver/internal/setting"
)

// DefaultCapacity is hotkeys-capacity's default: 1024 keys a summary,
// about 270 KB for both.
const DefaultCapacity = 1024

// Live is the Pair a server has in force (hotkeys-capacity): readers load
// it without a lock; a change of capacity swaps in new, empty summaries.
// The zero Live is off (no Pair).
type Live struct {
	p atomic.Pointer[Pair] // nil when off
}

// Load returns the pair in force (nil while off).
func (l *Live) Load() *Pair { return l.p.Load() }

// Reset puts new, empty summaries of capacity keys each in force (0 or
// less: off).
func (l *Live) Reset(capacity int) {
	if capacity <= 0 {
		l.p.Store(nil)
		return
	}
	l.p.Store(NewPair(capacity))
}

// Setting is CONFIG GET/SET hotkeys-capacity over l: a change starts new,
// empty summaries.
func (l *Live) Setting() setting.Live {
	return setting.Live{Name: "hotkeys-capacity", Get: func() string {
		if p := l.Load(); p != nil {
			return strconv.Itoa(p.Capacity())
		}
		return "0"
	}, Set: func(v string) error {
		n, err := setting.Must("hotkeys-capacity").ParseLive(v)
		if err != nil {
			return err
		}
		l.Reset(int(n))
		return nil
	}}
}

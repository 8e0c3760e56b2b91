package engine

import (
	"strconv"
	"time"
)

// Unit is how an argument's value and range are written.
type Unit uint8

const (
	// UnitCount is a plain integer (bursts, limits, rates, quantities).
	UnitCount Unit = iota
	// UnitSeconds is an integer number of seconds (CL.THROTTLE's period).
	UnitSeconds
	// UnitDuration is a duration in nanoseconds, written with a unit as
	// ParseDuration reads it (FormatDuration).
	UnitDuration
)

// Bound says what sets an argument's largest value below its own limit
// (MaxCount, MaxPeriod).
type Bound uint8

const (
	// BoundOwn: the argument's own range.
	BoundOwn Bound = iota
	// BoundPerNanosecond: GCRA's count_per_period is at most one per
	// nanosecond of period (period / count_per_period at least 1 ns).
	BoundPerNanosecond
	// BoundSpan: with the other arguments, a derived duration (the GCRA
	// tolerance, a bucket's time to refill or drain completely) must fit
	// in MaxSpan.
	BoundSpan
	// BoundLogLimit: a sliding log's limit is at most the server's
	// MaxLogLimit (sl-max-limit).
	BoundLogLimit
)

// ArgError is a limiter argument that is out of range, or a duration
// argument that does not parse: ParseRequest and Validate return it, so
// that the reply can name the argument, its value and the range it must be
// in. It wraps the sentinel that classifies it (ErrNegative, ErrZero,
// ErrNotInteger for a value beyond its bound, ErrOverflow, ErrLogLimit or
// ErrInvalidDuration), so errors.Is keeps working.
type ArgError struct {
	// Arg is the argument's name in the command's words: max_burst,
	// count_per_period, period, capacity, window, tokens...
	Arg string
	// Value is the argument as given (from ParseRequest), or its value
	// written in Unit (from Validate alone).
	Value string
	// Min and Max are the valid range, in Unit (nanoseconds for
	// UnitDuration). Max already accounts for Bound.
	Min, Max int64
	Unit     Unit
	Bound    Bound
	Err      error
	field    int // fBurst...fQuantity: which argument ParseRequest read
}

func (e *ArgError) Error() string {
	return e.Arg + " " + e.Value + ": " + e.Err.Error()
}

func (e *ArgError) Unwrap() error { return e.Err }

// FormatValue writes n in unit u: a duration as FormatDuration does, other
// units as a decimal integer.
func FormatValue(n int64, u Unit) string {
	if u == UnitDuration {
		return FormatDuration(n)
	}
	return strconv.FormatInt(n, 10)
}

// FormatDuration writes ns with the largest of the units ParseDuration
// reads (d, h, m, s, ms) that divides it exactly; a duration that is not
// a whole number of milliseconds is written with Go's time.Duration
// (which ParseDuration does not read back).
func FormatDuration(ns int64) string {
	for _, u := range []struct {
		ns   int64
		unit string
	}{{86400e9, "d"}, {3600e9, "h"}, {60e9, "m"}, {1e9, "s"}, {1e6, "ms"}} {
		if ns != 0 && ns%u.ns == 0 {
			return strconv.FormatInt(ns/u.ns, 10) + u.unit
		}
	}
	if ns == 0 {
		return "0"
	}
	return time.Duration(ns).String()
}

// units of each Request field by kind: CL.THROTTLE's period is whole
// seconds, every other period or window a duration.
func fieldUnit(k Kind, field int) Unit {
	if field == fWait {
		return UnitDuration
	}
	if field != fPeriod {
		return UnitCount
	}
	if k == KindGCRA {
		return UnitSeconds
	}
	return UnitDuration
}

// argRange is field's own range for kind k, in its unit.
func argRange(k Kind, field int) (lo, hi int64) {
	switch field {
	case fBurst:
		if k == KindGCRA {
			return 0, MaxCount
		}
		return 1, MaxCount
	case fRate:
		return 1, MaxCount
	case fPeriod:
		if k == KindGCRA {
			return 1, MaxPeriod / 1e9
		}
		return int64(time.Millisecond), MaxPeriod
	case fWait:
		return 0, MaxWait
	}
	switch k {
	case KindGCRA:
		return -MaxCount, MaxCount
	case KindConcurrency:
		return 1, MaxCount // a lease holds at least one unit
	}
	return 0, MaxCount
}

// argErr is an ArgError for field of kind k holding v (in nanoseconds for
// a period), with the field's own range.
// inRange checks that v, field of a kind-k request, is in 1..max: an
// *ArgError naming the field for a negative, zero or larger value.
func inRange(k Kind, field int, v, max int64) error {
	switch {
	case v < 0:
		return argErr(k, field, v, ErrNegative)
	case v == 0:
		return argErr(k, field, v, ErrZero)
	case v > max:
		return argErr(k, field, v, ErrNotInteger)
	}
	return nil
}

func argErr(k Kind, field int, v int64, sentinel error) *ArgError {
	u := fieldUnit(k, field)
	if u == UnitSeconds {
		v /= 1e9
	}
	lo, hi := argRange(k, field)
	name := "argument"
	if field == fWait {
		name = "WAIT"
	} else if k < numKinds {
		name = paramNames[k][field]
	}
	return &ArgError{Arg: name, Value: FormatValue(v, u), Min: lo, Max: hi, Unit: u, Err: sentinel, field: field}
}

// bounded sets e's Max to hi for bound b (never above the argument's own
// limit) and returns e.
func (e *ArgError) bounded(b Bound, hi int64) *ArgError {
	e.Bound = b
	e.Max = min(e.Max, hi)
	return e
}

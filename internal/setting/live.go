package setting

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cellserver/cellserver/internal/glob"
)

// Live is one setting as CONFIG GET and CONFIG SET see it: its name and
// how to read and change the value in force. The server's own settings
// parse and range-check their values with the Table's Specs.
type Live struct {
	// Name is the parameter's name, lower case, as in redis.conf.
	Name string
	// Get returns the current value.
	Get func() string
	// Set changes the value live; nil makes the parameter read-only
	// (ErrImmutable). Its error is shown to the client.
	Set func(value string) error
	// Fallback settings are used only when no other setting has the name:
	// a generic read-only view of every configured setting, which the
	// servers' own live ones override.
	Fallback bool
	// Batch, when not nil, completes Set for settings that change
	// together (the TLS files: a certificate and its key): Set only
	// records the value, and Registry.Set calls Batch.Apply once, after
	// every Set of the call, for all the settings that share it.
	Batch *Batch
}

// Batch takes into effect the values its settings' Set recorded. Apply
// either applies them all or changes nothing and returns why; the
// registry then puts the recorded values back with Set.
type Batch struct {
	Apply func() error
}

// Errors of Registry.Set, worded for the wire by the server (resp's
// errors.go).
var (
	// ErrImmutable: the setting has no Set.
	ErrImmutable = errors.New("can't set immutable config")
	// ErrDuplicate: a parameter named twice in one call.
	ErrDuplicate = errors.New("duplicate parameter")
)

// UnknownError is a Registry.Set of a name no setting has; Given is the
// name as the caller gave it.
type UnknownError struct{ Given string }

func (e *UnknownError) Error() string { return "unknown setting " + e.Given }

// SetError is a Registry.Set refused for one parameter: Name as the
// refusal names it (the name as given for ErrDuplicate, else the
// setting's), and why (ErrImmutable, ErrDuplicate, or what Set or a
// Batch's Apply returned). Nothing is left changed.
type SetError struct {
	Name string
	Err  error
}

func (e *SetError) Error() string { return e.Name + ": " + e.Err.Error() }

func (e *SetError) Unwrap() error { return e.Err }

// Registry is the settings in force, by name: CONFIG GET's and CONFIG
// SET's view. It is built once and not changed after (the values change
// through each setting's Set).
type Registry struct {
	byName map[string]*Live
	list   []*Live // sorted by name

	rewriteMu sync.Mutex // CONFIG REWRITEs take turns (two would race on the file)
}

// NewRegistry makes the registry of builtin settings and added ones (a
// server's own and those wired beside it). An added setting may not share
// a builtin's name unless replaceable(name) says so; a Fallback one is
// used only where no other has its name. The registry keeps pointers into
// both slices.
func NewRegistry(builtin, added []Live, replaceable func(name string) bool) (*Registry, error) {
	r := &Registry{byName: make(map[string]*Live)}
	for i := range builtin {
		r.byName[builtin[i].Name] = &builtin[i]
	}
	for _, fallback := range []bool{false, true} {
		for i := range added {
			st := &added[i]
			if st.Fallback != fallback {
				continue
			}
			name := strings.ToLower(st.Name)
			_, dup := r.byName[name]
			switch {
			case st.Get == nil:
				return nil, fmt.Errorf("setting %q has no getter", name)
			case dup && fallback:
				continue
			case dup && !replaceable(name):
				return nil, fmt.Errorf("setting %q defined twice", name)
			}
			r.byName[name] = st
		}
	}
	for _, st := range r.byName {
		r.list = append(r.list, st)
	}
	sort.Slice(r.list, func(i, j int) bool { return r.list[i].Name < r.list[j].Name })
	return r, nil
}

// Lookup returns the setting of a lower-case name (nil: none).
func (r *Registry) Lookup(name string) *Live { return r.byName[name] }

// Match returns the settings whose name matches one of the Redis glob
// patterns (in any letter case), in name order (CONFIG GET).
func (r *Registry) Match(patterns [][]byte) []*Live {
	var out []*Live
	for _, st := range r.list {
		for _, p := range patterns {
			if glob.Match(bytes.ToLower(p), []byte(st.Name)) {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

// Value returns the value of a setting CONFIG SET may change, as CONFIG
// GET shows it (false: no such setting, or read-only), for CONFIG REWRITE.
func (r *Registry) Value(name string) (string, bool) {
	st := r.byName[name]
	if st == nil || st.Set == nil {
		return "", false
	}
	return st.Get(), true
}

// Rewrite runs write, CONFIG REWRITE's writer of the configuration file,
// with Value (the live settings as CONFIG GET shows them), one call at a
// time.
func (r *Registry) Rewrite(write func(value func(name string) (string, bool)) error) error {
	r.rewriteMu.Lock()
	defer r.rewriteMu.Unlock()
	return write(r.Value)
}

// Set changes several settings as one (CONFIG SET), as Redis 7 does:
// every name is checked before any value is set; the values are set in
// order, and one refused puts back those set before it; then each Batch
// the settings share is applied once, and one failing puts every value
// back. restoreFailed is told of a value that could not be put back.
func (r *Registry) Set(names, values []string, restoreFailed func(name string, err error)) error {
	sts := make([]*Live, 0, len(names))
	for _, given := range names {
		name := strings.ToLower(given)
		st := r.byName[name]
		switch {
		case st == nil:
			return &UnknownError{Given: given}
		case st.Set == nil:
			return &SetError{Name: name, Err: ErrImmutable}
		case slices.Contains(sts, st):
			return &SetError{Name: given, Err: ErrDuplicate}
		}
		sts = append(sts, st)
	}
	old := make([]string, len(sts))
	restore := func(upTo int) {
		for j := upTo; j >= 0; j-- {
			if err := sts[j].Set(old[j]); err != nil {
				restoreFailed(sts[j].Name, err)
			}
		}
	}
	for k, st := range sts {
		old[k] = st.Get()
		if err := st.Set(values[k]); err != nil {
			restore(k - 1)
			return &SetError{Name: st.Name, Err: err}
		}
	}
	var applied []*Batch
	for _, st := range sts {
		if st.Batch == nil || slices.Contains(applied, st.Batch) {
			continue
		}
		applied = append(applied, st.Batch)
		if err := st.Batch.Apply(); err != nil {
			restore(len(sts) - 1)
			return &SetError{Name: st.Name, Err: err}
		}
	}
	return nil
}

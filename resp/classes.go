package resp

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/internal/setting"
)

// Key classes (internal/keyclass): every limiter decision is counted under
// its key's class as well as under its command, for INFO classes and the
// metrics. The classes in force are immutable; CONFIG SET metrics-class
// and metrics-class-limit swap in new ones that keep the counts of the
// classes they keep.

// ClassRules are the metrics-class rules (Config.MetricsClasses).
type ClassRules = keyclass.Rules

// DefaultMetricsClassLimit is metrics-class-limit's default.
const DefaultMetricsClassLimit = keyclass.DefaultLimit

// classTally is a connection's tally of decisions by class.
type classTally = keyclass.Tally

// classState is the server's key classes.
type classState struct {
	cur atomic.Pointer[keyclass.Classes] // nil when off
	mu  sync.Mutex                       // serialises changes; guards cfg
	cfg keyclass.Config
}

// initClasses puts the configured classes in force.
func (s *Server) initClasses(rules ClassRules, limit int) {
	s.updateClasses(func(c *keyclass.Config) { *c = keyclass.Config{Rules: rules, Limit: limit} })
}

// updateClasses changes the classes' configuration with change and puts
// the new classes in force (nil: off).
func (s *Server) updateClasses(change func(*keyclass.Config)) {
	st := &s.classes
	st.mu.Lock()
	defer st.mu.Unlock()
	change(&st.cfg)
	st.cur.Store(keyclass.New(st.cfg, st.cur.Load()))
}

// classConfig returns the classes' configuration.
func (s *Server) classConfig() keyclass.Config {
	s.classes.mu.Lock()
	defer s.classes.mu.Unlock()
	return s.classes.cfg
}

// resetClasses is CONFIG RESETSTAT's part: every class's counts to 0.
func (s *Server) resetClasses() {
	if cl := s.classes.cur.Load(); cl != nil {
		cl.Reset()
	}
}

// countClass counts a limiter decision on key under its class in the
// connection's tally: no lock, no atomic, no allocation (the tally's cache
// skips the prefix table while its keys keep one prefix).
// flushClasses, called where a command or a run of writes is accounted,
// adds the tally to the classes: one atomic add per class a pipeline
// touched, on the stripe of the connection's id.
func (c *Conn) countClass(key []byte, limited bool) {
	if cl := c.srv.classes.cur.Load(); cl != nil {
		cl.Count(&c.classes, key, limited)
	}
}

// flushClasses makes the decisions counted since the last call visible.
func (c *Conn) flushClasses() {
	if c.classes.Pending() {
		c.classes.Flush(c.id)
	}
}

// ClassStats are one key class's limiter decisions since the server
// started (or CONFIG RESETSTAT, or the class's creation).
type ClassStats = keyclass.Counts

// classStats returns every class's counts (nil while off).
func (s *Server) classStats() []ClassStats {
	if cl := s.classes.cur.Load(); cl != nil {
		return cl.Counts()
	}
	return nil
}

func (s *Server) infoClasses(b []byte, _ int64) []byte {
	b = append(b, "# Classes\r\n"...)
	cfg := s.classConfig()
	b = fieldInt(b, "metrics_class_rules", int64(len(cfg.Rules)))
	b = fieldInt(b, "metrics_class_limit", int64(cfg.Limit))
	cl := s.classes.cur.Load()
	if cl == nil {
		return fieldInt(b, "metrics_class_prefixes", 0)
	}
	b = fieldInt(b, "metrics_class_prefixes", int64(cl.Learned()))
	for _, k := range cl.Counts() {
		b = field(b, "class_"+k.Name, "kind="+k.Kind.String()+
			",allowed="+strconv.FormatInt(k.Allowed, 10)+",limited="+strconv.FormatInt(k.Limited, 10))
	}
	return b
}

// classSettings are CONFIG GET/SET metrics-class and metrics-class-limit.
func (s *Server) classSettings() []Setting {
	get := s.classConfig
	return []Setting{
		{Name: "metrics-class", Get: func() string { return get().Rules.String() }, Set: func(v string) error {
			rs, err := keyclass.ParseRules(v)
			if err != nil {
				return err
			}
			s.updateClasses(func(c *keyclass.Config) { c.Rules = rs })
			return nil
		}},
		{Name: "metrics-class-limit", Get: func() string { return strconv.Itoa(get().Limit) }, Set: func(v string) error {
			n, err := setting.Must("metrics-class-limit").ParseLive(v)
			if err != nil {
				return err
			}
			s.updateClasses(func(c *keyclass.Config) { c.Limit = int(n) })
			return nil
		}},
	}
}

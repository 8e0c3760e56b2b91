package resp

// Key classes (internal/keyclass): every limiter decision is counted under
// its key's class as well as under its command, for INFO classes and the
// metrics. The classes in force are immutable; CONFIG SET metrics-class
// and metrics-class-limit swap in new ones that keep the counts of the
// classes they keep.

// countClass counts a limiter decision on key under its class in the
// connection's tally: no lock, no atomic, no allocation (the tally's cache
// skips the prefix table while its keys keep one prefix).
// flushClasses, called where a command or a run of writes is accounted,
// adds the tally to the classes: one atomic add per class a pipeline
// touched, on the stripe of the connection's id.
func (t *tally) countClass(c *Conn, key []byte, limited bool) {
	if cl := c.srv.classes.Current(); cl != nil {
		cl.Count(&t.classes, key, limited)
	}
}

// flushClasses makes the decisions counted since the last call visible.
func (t *tally) flushClasses(c *Conn) {
	if t.classes.Pending() {
		t.classes.Flush(c.id)
	}
}

// classSettings are CONFIG GET/SET metrics-class and metrics-class-limit
// (keyclass.Live).
func (s *Server) classSettings() []Setting { return s.classes.Settings() }

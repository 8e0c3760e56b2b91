package resp

import (
	"math/rand/v2"
	"strconv"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/reply"
	"github.com/cellserver/cellserver/internal/serverstats"
)

// The heavy hitters: two bounded summaries (internal/hotkeys) of the keys
// limiter commands name, one of every decision (requested) and one of the
// limited ones, each key counted per command (its family); the Envoy
// rate-limit service's decisions count as one more family, "rls". They
// answer LIMITER TOP, OBJECT FREQ (so that redis-cli --hotkeys works), INFO
// hotkeys and the metrics' top keys.

// hotTop is how many keys of each summary INFO and the metrics show.
const hotTop = 10

// countKey records a limiter decision on key for the current command,
// one in hotkeys.Sample picked by the connection's own generator (no lock,
// no allocation).
func (t *tally) countKey(c *Conn, key []byte, limited bool) {
	if limited {
		violation(c, key)
	}
	if h := c.srv.hot.Load(); h != nil && t.hotRand.Pick(rand.Uint64) {
		h.Record(family(c.cur.index), key, limited)
	}
}

// family is a command's family in the summaries: its table index (the
// limiter commands come first in the table, well below rlsFamily).
func family(index int) uint8 { return uint8(min(index, int(rlsFamily)-1)) }

// rlsFamily is the family of the Envoy rate-limit service's decisions
// (CountDecision), shown as the command "rls".
const rlsFamily uint8 = 255

// familyName is the command a family's keys are listed under.
func (t *table) familyName(f uint8) string {
	switch {
	case f == rlsFamily:
		return "rls"
	case int(f) >= len(t.all): // cannot happen while the table has fewer than rlsFamily commands
		return "unknown"
	}
	return t.all[f].fullName
}

// CountDecision records a decision the Envoy rate-limit service took on
// key (its limiter key) in the heavy-hitter summaries, under the command
// "rls", sampled as the limiter commands are (one in hotkeys.Sample). Safe for
// concurrent use; key is not kept.
func (s *Server) CountDecision(key []byte, limited bool) {
	h := s.hot.Load()
	if h == nil || rand.Uint64()%hotkeys.Sample != 0 {
		return
	}
	h.Record(rlsFamily, key, limited)
}

// topKeys returns the n most counted keys of a summary, under their
// commands' names.
func topKeys(t *table, sk *hotkeys.Sketch, n int) []serverstats.HotKey {
	top := sk.Top(n)
	out := make([]serverstats.HotKey, len(top))
	for i, e := range top {
		n, err := hotkeys.Scale(e.Count, e.Err)
		out[i] = serverstats.HotKey{Key: string(e.Key), Command: t.familyName(e.Family), Count: n, Err: err}
	}
	return out
}

func limiterTop(c *Conn, args [][]byte) error {
	h := c.srv.hot.Load()
	if h == nil {
		return errHotkeysOff
	}
	sk, n := h.Requested, int64(10)
	for i := 2; i < len(args); i++ {
		switch {
		case equalFoldString(args[i], "requested"):
			sk = h.Requested
		case equalFoldString(args[i], "limited"):
			sk = h.Limited
		case equalFoldString(args[i], "count") && i+1 < len(args):
			v, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			if err != nil || v < 1 {
				return engine.ErrNotInteger
			}
			n = min(v, int64(sk.Capacity()))
			i++
		default:
			return engine.ErrSyntax
		}
	}
	out := reply.Array()
	for _, k := range topKeys(c.srv.table, sk, int(n)) {
		out.Elems = append(out.Elems, reply.Array(reply.Bulk(k.Key), reply.Bulk(k.Command), reply.Int(k.Count), reply.Int(k.Err)))
	}
	c.WriteNode(out)
	return nil
}

func objectFreq(c *Conn, args [][]byte) error {
	h := c.srv.hot.Load()
	if h == nil {
		return errHotkeysOff
	}
	n, _ := h.Requested.Estimate(rlsFamily, args[2]) // the Envoy service's
	n *= hotkeys.Sample
	for _, cmd := range c.srv.table.all {
		if cmd.Group == "ratelimit" && cmd.Finish != nil {
			cnt, _ := h.Requested.Estimate(family(cmd.index), args[2])
			n += cnt * hotkeys.Sample
		}
	}
	c.WriteInt(int64(n))
	return nil
}

// hotkeysSetting is CONFIG GET/SET hotkeys-capacity (hotkeys.Live).
func (s *Server) hotkeysSetting() Setting { return s.hot.Setting() }

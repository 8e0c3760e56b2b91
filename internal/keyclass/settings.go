package keyclass

import (
	"strconv"

	"github.com/cellserver/cellserver/internal/setting"
)

// Settings are CONFIG GET/SET metrics-class and metrics-class-limit over
// l: a change puts new classes in force that keep the counts of the
// classes they keep.
func (l *Live) Settings() []setting.Live {
	return []setting.Live{
		{Name: "metrics-class", Get: func() string { return l.Config().Rules.String() }, Set: func(v string) error {
			rs, err := ParseRules(v)
			if err != nil {
				return err
			}
			l.Update(func(c *Config) { c.Rules = rs })
			return nil
		}},
		{Name: "metrics-class-limit", Get: func() string { return strconv.Itoa(l.Config().Limit) }, Set: func(v string) error {
			n, err := setting.Must("metrics-class-limit").ParseLive(v)
			if err != nil {
				return err
			}
			l.Update(func(c *Config) { c.Limit = int(n) })
			return nil
		}},
	}
}

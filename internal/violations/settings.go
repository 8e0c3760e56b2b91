package violations

import (
	"strconv"

	"github.com/cellserver/cellserver/internal/setting"
)

// Settings are CONFIG GET/SET violations-log and violations-log-rate over
// l, changed live.
func (l *Log) Settings() []setting.Live {
	return []setting.Live{
		{Name: "violations-log", Get: func() string {
			if l.Enabled() {
				return "yes"
			}
			return "no"
		}, Set: func(v string) error {
			b, err := setting.ParseYesNo(v)
			if err != nil {
				return err
			}
			l.SetEnabled(b)
			return nil
		}},
		{Name: "violations-log-rate", Get: func() string { return strconv.FormatInt(l.Rate(), 10) }, Set: func(v string) error {
			n, err := setting.Must("violations-log-rate").ParseLive(v)
			if err != nil {
				return err
			}
			l.SetRate(n)
			return nil
		}},
	}
}

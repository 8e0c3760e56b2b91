package limitpolicy

import "github.com/cellserver/cellserver/internal/setting"

// Settings are CONFIG GET/SET limit-override and limit-shadow over p. A
// change is checked, then given to replicate in its canonical form when
// replicate is not nil (a group applies it through its log, on every
// member), else put in force at once.
func (p *Policy) Settings(replicate func(name, canonical string) error) []setting.Live {
	set := func(name, canonical string, apply func()) error {
		if replicate != nil {
			return replicate(name, canonical)
		}
		apply()
		return nil
	}
	return []setting.Live{
		{Name: "limit-override", Get: func() string { return FormatOverrides(p.Overrides()) }, Set: func(v string) error {
			o, err := ParseOverrides(v)
			if err != nil {
				return err
			}
			return set("limit-override", FormatOverrides(o), func() { p.SetOverrides(o) })
		}},
		{Name: "limit-shadow", Get: func() string { return FormatShadow(p.Shadow()) }, Set: func(v string) error {
			sh, err := ParseShadow(v)
			if err != nil {
				return err
			}
			return set("limit-shadow", FormatShadow(sh), func() { p.SetShadow(sh) })
		}},
	}
}

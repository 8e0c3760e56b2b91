package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/resp"
)

// tableSettings gives CONFIG GET every setting of the table, read from the
// configuration it was started with: resp and the other parts serve their
// live settings themselves and override these (resp.Setting.Fallback).
func (c *Config) tableSettings() []resp.Setting {
	out := make([]resp.Setting, 0, len(directives))
	for _, d := range directives {
		field := d.field(c)
		spec := d.spec
		out = append(out, resp.Setting{
			Name:     d.name,
			Get:      func() string { return formatField(spec, field) },
			Fallback: true,
		})
	}
	return out
}

// formatField writes a setting's field as a configuration file would. A
// secret is shown as set or not, never its value (CONFIG GET is not a way to
// read credentials; SLOWLOG says "(redacted)" the same way).
func formatField(s *setting.Spec, field any) string {
	if s.Kind == setting.Secret {
		if v, _ := field.(*string); v != nil && *v != "" {
			return "(redacted)"
		}
		return ""
	}
	return rawField(field)
}

// rawField writes a setting's field as a configuration file would, a
// secret included (CONFIG REWRITE).
func rawField(field any) string {
	switch p := field.(type) {
	case *string:
		return *p
	case *bool:
		return yesNo(*p)
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *uint64:
		return strconv.FormatUint(*p, 10)
	case *time.Duration:
		return p.String()
	case fmt.Stringer:
		return p.String()
	}
	return fmt.Sprint(field)
}

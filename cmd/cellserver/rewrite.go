package main

import (
	"os"

	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/internal/outlimit"
	"github.com/cellserver/cellserver/internal/setting"
)

// rewriter returns CONFIG REWRITE's writer (resp.Config.RewriteConfig) for
// the configuration file given was read from, or nil without one. given is
// the configuration as the file and the flags gave it, before start-up
// filled anything in (the shard count in use, say): every setting is
// written with the value the server holds live, or else given's, as
// Redis's rewrite does (flags included), into the file's text as
// setting.Rewrite edits it.
func (given *Config) rewriter() func(live func(string) (string, bool)) error {
	if given.File == "" {
		return nil
	}
	path := given.File
	return func(live func(string) (string, bool)) error {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		def := DefaultConfig()
		values := make([]setting.Value, 0, len(directives))
		for _, d := range directives {
			if given.rewriteSkipsSecret(d.name) {
				continue // read from its file: never written out
			}
			v, ok := live(d.name)
			if !ok {
				v = rawField(d.field(given))
			}
			values = append(values, setting.Value{Name: d.name, Value: v, Default: sameValue(d, v, rawField(d.field(&def)))})
		}
		out, err := setting.Rewrite(src, values, func(name, a, b string) bool {
			return sameValue(*lookupDirective(name), a, b)
		})
		if err != nil {
			return err
		}
		return setting.WriteFileAtomic(path, out)
	}
}

// lookupDirective returns the directive named name, or nil.
func lookupDirective(name string) *directive {
	for i := range directives {
		if directives[i].name == name {
			return &directives[i]
		}
	}
	return nil
}

// sameValue reports whether a and b give d the same value (512mb and
// 536870912, "60" and "60 1"): each is parsed into a configuration and the
// fields compared. Text that does not parse is compared as it is.
func sameValue(d directive, a, b string) bool {
	ca, cb := DefaultConfig(), DefaultConfig()
	if d.set(&ca, a) != nil || d.set(&cb, b) != nil {
		return a == b
	}
	return canonical(d, &ca) == canonical(d, &cb)
}

// canonical writes d's field of c in one form per value.
func canonical(d directive, c *Config) string {
	v := rawField(d.field(c))
	switch d.name {
	case "client-output-buffer-limit":
		if l, err := outlimit.Parse(v, outlimit.Default()); err == nil {
			return l.String()
		}
	case "maxmemory-clients":
		if l, err := clientmem.ParseLimit(v); err == nil {
			return l.String()
		}
	}
	return v
}

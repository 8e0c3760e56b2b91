package resp

import "github.com/cellserver/cellserver/internal/glob"

// globMatch reports whether s matches the Redis glob pattern p (glob.Match).
func globMatch(p, s []byte) bool { return glob.Match(p, s) }

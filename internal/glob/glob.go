// Package glob matches Redis glob patterns (KEYS, SCAN MATCH, CONFIG GET,
// the key patterns of limit-override and limit-shadow, and region-policy).
// Match tests one pattern; a Table tests an ordered list of them (a rule
// table) in one pass over the key. Safe for concurrent use.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package glob

// Match reports whether s matches the Redis glob pattern p: '*' any
// run, '?' any byte, '[abc]', '[^abc]', '[a-z]' classes, '\' escapes the
// next byte. It runs in O(len(s) × len(p)) at worst, with no recursion (the
// classic single backtrack point for the last '*'), so no pattern can make
// it blow up.
func Match(p, s []byte) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				starP, starS = pi, si
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if ok, next := matchClass(p, pi, s[si]); ok {
					pi = next
					si++
					continue
				}
			case '\\':
				if pi+1 < len(p) {
					if p[pi+1] == s[si] {
						pi += 2
						si++
						continue
					}
				} else if s[si] == '\\' {
					pi++
					si++
					continue
				}
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the class starting at p[pi] == '['. It
// returns whether c matched and the index after the class. An unterminated
// class runs to the end of the pattern, as in Redis.
func matchClass(p []byte, pi int, c byte) (bool, int) {
	pi++
	not := false
	if pi < len(p) && p[pi] == '^' {
		not = true
		pi++
	}
	match := false
	for pi < len(p) && p[pi] != ']' {
		switch {
		case p[pi] == '\\' && pi+1 < len(p):
			pi++
			if p[pi] == c {
				match = true
			}
		case pi+2 < len(p) && p[pi+1] == '-' && p[pi+2] != ']':
			lo, hi := p[pi], p[pi+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= c && c <= hi {
				match = true
			}
			pi += 2
		default:
			if p[pi] == c {
				match = true
			}
		}
		pi++
	}
	if pi < len(p) {
		pi++ // the ']'
	}
	return match != not, pi
}

// Package limitpolicy holds the operator's rules for limiter requests,
// matched by a Redis glob on the key: limit-override replaces the
// parameters a caller sends (the first rule that matches wins), and
// limit-shadow marks a request as shadow (answered allowed when it would
// have been limited, and counted; see engine.Request.Shadow).
//
// The rules are applied where a request is parsed, before it is logged, so
// a replicated op carries the final parameters and shadow flag and every
// replica applies it alike whatever its own rules (DESIGN.md). Each list is
// a rules.Table (internal/rules: the parse loop, caps, formatter and
// first-match lookup shared with metrics-class and region-policy). A
// Policy is safe for concurrent use: Apply reads each immutable list
// through an atomic pointer (rules.Live), and a Set replaces it whole.
// Policy.Settings are CONFIG GET/SET limit-override and limit-shadow.
package limitpolicy

// Package rules is the one glob-rule table type behind the settings
// limit-override, limit-shadow, metrics-class and region-policy: an
// ordered list of rules, each with a Redis glob pattern, where the first
// rule whose pattern matches a key decides.
//
// What differs between the settings — the words of one rule and what they
// mean — is a Syntax (how to read one rule from the front of a list of
// words and write it back); what they share is written once here: the
// parse loop over a value quoted as the configuration file quotes it
// (setting.SplitLine), the caps (glob.CheckRules), the formatter
// (setting.Quote for patterns), the compiled first-match lookup (one
// glob.Table, one pass over the key whatever the number of rules) and the
// live swap (Live: one atomic pointer, replaced whole by CONFIG SET or a
// replicated setting).
//
// It owns no setting and no wording for the wire; it imports only
// internal/glob and internal/setting (like every internal package, nothing
// of the project but engine and internal packages: internal/layers).
package rules

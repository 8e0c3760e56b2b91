// Package keyclass sorts limiter keys into a bounded set of classes for
// metrics, and counts the decisions (allowed, limited) of each class.
//
// A key's class is the first configured rule (NAME PATTERN, a Redis glob)
// that matches the key; else the key's prefix up to its first ':' — the
// first Limit distinct prefixes each get a class of their own, in the order
// they are seen; every later prefix, a key without ':' and a prefix that
// cannot be a label (longer than MaxNameLen, or bytes other than printable
// ASCII except ',', '=', '"' and '\') count under Other. So the classes
// never number more than rules + Limit + 1, whatever the keys, and never
// more than MaxClasses (MaxRules rules, MaxLimit prefixes, Other) whatever
// the configuration: that bounds the label values of the class metrics.
//
// The rules are one rules.Table (internal/rules: the parse loop, caps,
// formatter and compiled first-match lookup shared with limit-override,
// limit-shadow and region-policy), made when the classes are made, so a
// key is matched against every rule in one pass over the key, whatever
// their number.
//
// Classify never allocates and takes no lock once a prefix is known: the
// prefix table is an immutable map swapped whole (copy on write) when a
// prefix is learned, at most Limit times. A class's counters are striped
// (the caller picks the stripe, a connection id), so that event loops on
// different CPUs rarely share a cache line; a Tally gathers one writer's
// decisions in plain counters, with its last prefix cached, and adds them
// at Flush (a connection flushes once per command or pipelined run of
// writes), so that a decision costs no atomic operation of its own.
//
// Live holds the classes a server has in force and their configuration,
// swapped whole by a change that keeps the counts of the classes it keeps;
// Live.Settings are CONFIG GET/SET metrics-class and metrics-class-limit.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package keyclass

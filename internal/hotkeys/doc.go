// Package hotkeys finds the most frequent keys of a stream in bounded
// memory: a Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005)
// split into stripes by key hash so that many event loops record at once.
// A key's estimated count is never below its true count and exceeds it by
// at most the returned error bound; a key whose true count is above
// N/capacity (N the stream's length) is always in the summary.
//
// A server keeps a Pair of summaries (every decision, the limited ones),
// fed one decision in Sample picked by a per-writer Sampler; Scale turns a
// sampled count and error bound back into estimates of the true ones. Live
// holds the Pair in force and is CONFIG GET/SET hotkeys-capacity (a change
// starts new, empty summaries).
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package hotkeys

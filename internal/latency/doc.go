// Package latency owns the command latency histograms: log-linear buckets
// striped by connection, their quantiles (INFO latencystats, the metrics)
// and their reset (CONFIG RESETSTAT). It is a model only: it knows nothing
// of commands beyond an index, and must never import resp (or any package
// of the server); resp reports what it records.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages (checked by internal/layers).
package latency

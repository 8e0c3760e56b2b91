// Package version names the build of cellserver: the release it was cut
// from, or the commit it was built at.
//
// A release build sets it at link time (scripts/release.sh):
//
//	go build -ldflags "-X github.com/cellserver/cellserver/internal/version.release=$(scripts/version.sh)"
//
// Any other build falls back to what the Go toolchain recorded in the
// binary: the module version when installed with go install at a tag, or
// the VCS revision of a build inside a git checkout.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package version

import (
	"runtime/debug"
	"strings"
)

// base is the version a build that carries no release and no module
// version reports, suffixed with the commit when one is known.
const base = "0.1.0"

// release is set by the linker (-X) for release builds and is never
// written at run time; empty otherwise.
var release string

// String returns the version: "0.2.0" for a release, "0.2.0-3-gabc1234"
// for a build three commits after it, "0.1.0-dev+abc1234def56" for an
// untagged build at commit abc1234def56 ("+dirty" with uncommitted
// changes). It always begins with major.minor.patch, for clients that
// parse the version HELLO reports.
func String() string {
	if release != "" {
		return strings.TrimPrefix(release, "v")
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return base + "-dev"
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo derives the version from what the toolchain recorded.
func fromBuildInfo(bi *debug.BuildInfo) string {
	// A module version from go install at a tag ("v0.2.0"). Pseudo-versions
	// (v0.0.0-2026...-abc) carry no release, so the revision says more.
	if v := bi.Main.Version; v != "" && v != "(devel)" && !strings.HasPrefix(v, "v0.0.0-") {
		return strings.TrimSuffix(strings.TrimPrefix(v, "v"), "+dirty")
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return base + "-dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := base + "-dev+" + rev
	if dirty {
		v += ".dirty"
	}
	return v
}

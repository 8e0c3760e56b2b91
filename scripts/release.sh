#!/usr/bin/env bash
# Cross-builds static cellserver binaries for release, with the version of
# the checkout (scripts/version.sh) embedded, and their SHA-256 checksums:
#
#   dist/cellserver-VERSION-linux-amd64
#   dist/cellserver-VERSION-linux-arm64
#   dist/SHA256SUMS
#
# The binaries are pure Go (CGO_ENABLED=0), so they run on any Linux of
# their architecture, in a FROM scratch image included. Builds are
# reproducible: -trimpath, and no build ID.
#
# Environment:
#   DIST=dist                  output directory
#   PLATFORMS="linux/amd64 linux/arm64"
#   VERSION=                   override the version (default: scripts/version.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${DIST:-dist}
platforms=${PLATFORMS:-linux/amd64 linux/arm64}
version=${VERSION:-$(scripts/version.sh)}
mkdir -p "$dist"
names=()
for p in $platforms; do
	os=${p%/*}
	arch=${p#*/}
	name="cellserver-${version}-${os}-${arch}"
	echo "building $name" >&2
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
		-ldflags "-s -w -buildid= -X github.com/cellserver/cellserver/internal/version.release=${version}" \
		-o "$dist/$name" ./cmd/cellserver
	names+=("$name")
done
(cd "$dist" && sha256sum "${names[@]}" >SHA256SUMS)
cat "$dist/SHA256SUMS"

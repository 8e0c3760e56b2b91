#!/usr/bin/env bash
# Builds cellserver's container image (Containerfile) from this checkout
# with podman (or docker: IMAGE_TOOL=docker): the static binary for each
# architecture first (CGO_ENABLED=0, the version of scripts/version.sh
# embedded), then the image around it, so the image build itself needs no
# network.
#
# Environment:
#   IMAGE=cellserver:VERSION     image name and tag
#   ARCH=amd64                   GOARCH of the binary and image (amd64, arm64)
#   IMAGE_TOOL=podman            podman or docker
#   PODMAN_FLAGS=                global podman flags, e.g. "--storage-driver vfs
#                                --root DIR --runroot DIR" where overlay
#                                mounts are not allowed (containers, CI)
#   SAVE=                        also write the image to this file
#                                (docker-archive tar), e.g. for podman load
set -euo pipefail
cd "$(dirname "$0")/.."
version=${VERSION:-$(scripts/version.sh)}
arch=${ARCH:-amd64}
tool=${IMAGE_TOOL:-podman}
# A tag may not hold '+': the build metadata becomes '-'.
image=${IMAGE:-cellserver:${version//+/-}}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
	-ldflags "-s -w -buildid= -X github.com/cellserver/cellserver/internal/version.release=${version}" \
	-o "$ctx/cellserver-linux-$arch" ./cmd/cellserver
mkdir "$ctx/data"
cp Containerfile "$ctx/Containerfile"

flags=()
if [ "$tool" = podman ]; then
	# shellcheck disable=SC2206 # PODMAN_FLAGS is a list of words
	flags=(${PODMAN_FLAGS:-})
fi
"$tool" "${flags[@]}" build --platform "linux/$arch" --build-arg "TARGETARCH=$arch" \
	--build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" >&2
if [ -n "${SAVE:-}" ]; then
	rm -f "$SAVE"
	if [ "$tool" = podman ]; then
		podman "${flags[@]}" save --format docker-archive -o "$SAVE" "$image" >&2
	else
		"$tool" save -o "$SAVE" "$image" >&2
	fi
fi
echo "$image"

#!/usr/bin/env bash
# Installs what the tests need (redis-cli, redis-benchmark, redis-server,
# promtool, redis-py and podman from Debian's packages, when missing, ioredis from npm
# and helm and grpcurl into .tools/bin with go install), then
# runs go vet and the whole test suite under the race detector, in the
# server's module and in bench/ (the load generator, a module of its own).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# promtool (Debian's prometheus package), for the shipped alerting rules'
# tests (metrics/rules_test.go).
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
# redis-py, for the client-library test (Debian's package: PyPI is not needed).
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing+=(python3-redis)
# The Python front door (clients/python, examples/python, test/clients_python_test.go):
# its web frameworks and pytest, Debian's packages as examples/python/requirements-debian.txt.
for pkg in starlette:python3-starlette uvicorn:python3-uvicorn httpx:python3-httpx flask:python3-flask pytest:python3-pytest; do
	[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import ${pkg%%:*}" >/dev/null 2>&1 || missing+=("${pkg#*:}")
done
# podman, to build and inspect the container image (test/image_test.go).
command -v podman >/dev/null 2>&1 || missing+=(podman)
if ((${#missing[@]} > 0)); then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "installing: ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

# ioredis, for the Node.js client test, pinned by test/node/package-lock.json.
if command -v npm >/dev/null 2>&1; then
	(cd test/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
# The Node front door (clients/node: ioredis, Express for its tests) and its
# example (examples/node: Express), for test/clients_node_test.go, pinned by
# their package-lock.json files.
if command -v npm >/dev/null 2>&1; then
	(cd clients/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	(cd examples/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# helm, to lint and render the chart (test/helm_test.go), pinned.
if [ ! -x .tools/bin/helm ]; then
	GOBIN="$PWD/.tools/bin" go install helm.sh/helm/v3/cmd/helm@v3.22.0
fi
export HELM="$PWD/.tools/bin/helm"
# grpcurl, to replay docs/envoy.md's recipe (test/docs_cluster_test.go), pinned.
if [ ! -x .tools/bin/grpcurl ]; then
	GOBIN="$PWD/.tools/bin" go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
fi
export GRPCURL="$PWD/.tools/bin/grpcurl"

go vet ./...
go test -race -timeout 40m ./...
# The RESP server again with a goroutine per connection (TLS connections and
# cluster nodes use that path; plaintext standalone clients use event loops).
go test -race -count=1 ./resp -args -goroutine-conns
(cd bench && go vet ./... && go test -race ./...)

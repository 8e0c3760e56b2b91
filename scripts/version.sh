#!/usr/bin/env bash
# Prints the version of the checkout, as release builds embed it: the
# nearest v* tag by git describe without its "v" ("0.2.0", or
# "0.2.0-3-gabc1234" three commits later, "-dirty" with uncommitted
# changes); without a tag, 0.1.0-dev+ and the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	echo "${v#v}"
	exit 0
fi
rev=$(git rev-parse --short=12 HEAD)
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty=".dirty"
echo "0.1.0-dev+${rev}${dirty}"

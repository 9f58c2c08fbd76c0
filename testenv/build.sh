#!/usr/bin/env bash
# Builds the testenv program from Go modules (pinned in go.sum) unless a build of
# exactly these sources is cached, and prints the binary's path.
#
# The cache lives in $LOCKSTEP_TESTENV_CACHE (default: <repo>/target/testenv),
# keyed by a hash of go.mod, go.sum and the Go sources.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${LOCKSTEP_TESTENV_CACHE:-$here/../target/testenv}"

if ! command -v go >/dev/null 2>&1; then
  echo "testenv: the Go toolchain (go 1.26 or newer) is not on PATH; install Go to build the test control plane" >&2
  exit 1
fi

key="$(cd "$here" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)"
bin="$cache/testenv-$key"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
version=v1.37.2
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
done
echo "testenv: building kube-apiserver, kube-scheduler and etcd from Go modules (a first build takes about 10 minutes)" >&2
tmp="$bin.tmp.$$"
if ! (cd "$here" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" -o "$tmp" .) >&2; then
  rm -f "$tmp"
  echo "testenv: go build failed (see above); if a module download was refused, check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY))" >&2
  exit 1
fi
mv "$tmp" "$bin"
# Builds of older sources are of no further use.
find "$cache" -maxdepth 1 -name 'testenv-*' ! -name "testenv-$key" -type f -delete 2>/dev/null || true
echo "$bin"

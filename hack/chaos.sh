#!/usr/bin/env bash
# hack/chaos.sh - the chaos proxy (hack/chaos/main.go: a TLS proxy that
# injects API server and network faults; for spec/e2e/chaos_spec.lua and
# bench/chaos.sh, never part of luaop), built once into the cache outside
# the repository, keyed by its source's hash.
#
#   hack/chaos.sh bin            build it if needed; print its path
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=paths.sh
. "$root/hack/paths.sh"
case "${1:-}" in
  bin)
    key=$(cat "$root/hack/chaos/go.mod" "$root/hack/chaos/main.go" | sha256sum | cut -c1-16)
    bin="$cache/chaos-$key/chaos"
    if [ ! -x "$bin" ]; then
      go=$(find_go) || { echo "chaos: Go is needed to build the chaos proxy (run 'make deps' for details)" >&2; exit 1; }
      mkdir -p "$cache/chaos-$key"
      (cd "$root/hack/chaos" && go_env "$go" build -trimpath -o "$bin.tmp.$$" .) >&2
      mv "$bin.tmp.$$" "$bin"
    fi
    echo "$bin"
    ;;
  *) echo "usage: hack/chaos.sh bin" >&2; exit 2 ;;
esac

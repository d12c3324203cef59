#!/usr/bin/env bash
# bench/peer.sh - build the controller-runtime peer of the four example
# operators (bench/peer/, benchmarks only: never part of luaop or its
# image) and print the path of its binary on stdout.
#
#   bench/peer.sh            -> .../peer-<key>/peer
#
# The binary is built once, stripped (-trimpath -s -w, as the size
# comparison needs), into the cache hack/cluster.sh keeps its binaries in,
# keyed by the content of bench/peer (go.mod, go.sum, *.go):
#   ${LUAOP_CACHE:-${XDG_CACHE_HOME:-~/.cache}/luaop}/peer-<sha256, 16 hex>/peer
# with Go's module and build caches beside it (hack/paths.sh's go_env).
# On a warm machine it only prints the path.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../hack/paths.sh
. "$root/hack/paths.sh"
src="$root/bench/peer"

log() { printf 'peer: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

key=$(cd "$src" && sha256sum go.mod go.sum ./*.go | sha256sum | cut -c1-16)
dir="$cache/peer-$key"
bin="$dir/peer"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

go=$(find_go) || die "Go is needed to build the peer (run 'make deps' for details)"
mkdir -p "$dir" || die "could not create $dir (set LUAOP_CACHE to a writable directory)"
tmp="$dir/peer.tmp.$$"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
log "building the controller-runtime peer (first time for this source)"
(cd "$src" && go_env "$go" build -trimpath -ldflags='-s -w' -o "$tmp" .) ||
  die "building the peer failed (go's output above): check the network to the Go module proxy (GOPROXY) and the free space in $cache"
mv -f "$tmp" "$bin"
log "built the peer in $((SECONDS - start)) s ($(du -k "$bin" | cut -f1) KiB)"
echo "$bin"

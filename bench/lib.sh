# bench/lib.sh NAME - what every benchmark starts with (sourced): the repo
# as the working directory, a running local control plane and a built
# luaop ($bin: build/luaop, or LUAOP=path), the cluster's KUBECONFIG and
# KUBECTL, kc (kubectl against it), a fresh namespace $ns and a scratch
# directory $tmp, both removed at exit (KEEP=1 keeps $tmp), as is the luaop
# the benchmark runs in the background, if it keeps its pid in $pid.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${LUAOP:-build/luaop}
hack/cluster.sh status >/dev/null 2>&1 || { echo "bench: run 'make cluster-up' first" >&2; exit 1; }
[ -x "$bin" ] || { echo "bench: run 'make' first" >&2; exit 1; }
eval "$(hack/cluster.sh env)"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
ns=bench-$1-$$
tmp=$(mktemp -d)
pid=
bench_cleanup() {
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; fi
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "kept: $tmp" >&2; else rm -rf "$tmp"; fi
}
trap bench_cleanup EXIT
kc create namespace "$ns" >/dev/null

# bench/lib.sh NAME - what every benchmark starts with (sourced): the repo
# as the working directory, a running local control plane and a built
# luaop ($bin: build/luaop, or LUAOP=path), the cluster's KUBECONFIG and
# KUBECTL, kc (kubectl against it), and a fresh namespace $ns and scratch
# directory $tmp for the benchmark's cleanup to remove.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${LUAOP:-build/luaop}
hack/cluster.sh status >/dev/null 2>&1 || { echo "bench: run 'make cluster-up' first" >&2; exit 1; }
[ -x "$bin" ] || { echo "bench: run 'make' first" >&2; exit 1; }
eval "$(hack/cluster.sh env)"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
ns=bench-$1-$$
tmp=$(mktemp -d)

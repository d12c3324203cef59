# bench/lib.sh NAME - what every benchmark starts with (sourced): the repo
# as the working directory, a running local control plane and a built
# luaop ($bin: build/luaop, or LUAOP=path), the cluster's KUBECONFIG and
# KUBECTL, kc (kubectl against it), a fresh namespace $ns and a scratch
# directory $tmp, both removed at exit (KEEP=1 keeps $tmp), as is the luaop
# the benchmark runs in the background, if it keeps its pid in $pid (the
# packages the benchmarks need and build/luaop are made first if missing);
# wait_until, and configmaps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${LUAOP:-build/luaop}
hack/cluster.sh status >/dev/null 2>&1 || { echo "bench: run 'make cluster-up' first" >&2; exit 1; }
# what the benchmarks use beside the build (bc, gdb, time, gnuplot), and a
# luaop, made here if missing: after make cluster-up, no other step
if ! command -v bc >/dev/null || ! command -v gdb >/dev/null || ! command -v gnuplot >/dev/null ||
  [ ! -x /usr/bin/time ]; then
  hack/deps.sh build bench || { echo "bench: could not install what the benchmarks need (above)" >&2; exit 1; }
fi
if [ ! -x "$bin" ] && [ -z "${LUAOP:-}" ]; then
  echo "bench: $bin is missing: building it (make all)" >&2
  make all >&2 || { echo "bench: make all failed (above)" >&2; exit 1; }
fi
[ -x "$bin" ] || { echo "bench: $bin is not an executable (LUAOP)" >&2; exit 1; }
eval "$(hack/cluster.sh env)"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
ns=bench-$1-$$
tmp=$(mktemp -d)
pid=
bench_cleanup() {
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; fi
  # waits until it is gone: the next benchmark's luaop would otherwise
  # cache, and reconcile, what a namespace being deleted still holds
  kc delete namespace "$ns" --timeout=300s >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "kept: $tmp" >&2; else rm -rf "$tmp"; fi
}
trap bench_cleanup EXIT
# wait_until WHAT COMMAND...: until COMMAND succeeds, for at most
# ${WAIT_SECONDS:-60} s, and only while the luaop in $pid (if any) runs;
# else says so and fails (which ends the benchmark, unless tested)
wait_until() {
  local deadline=$((SECONDS + ${WAIT_SECONDS:-60}))
  until "${@:2}"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "bench: luaop exited while waiting for $1" >&2
      return 1
    fi
    [ $SECONDS -lt $deadline ] || { echo "bench: timed out waiting for $1" >&2; return 1; }
    sleep 0.05
  done
}
# Measuring a process (bench/compare.sh, bench/scale.sh): now (s, the
# epoch's), rss PID FIELD (VmRSS or VmHWM, KiB), cpu PID (user and system
# time, s); metrics: the /metrics of the process on $port; msum METRIC: the
# sum of its samples (all labels); reconciled N: at least N reconciles
# (controller-runtime's names, which luaop serves too), nothing queued.
now() { date +%s.%N; }
rss() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
metrics() { curl -sf "http://127.0.0.1:$port/metrics"; }
msum() { metrics | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $NF} END {printf "%.6f\n", s}'; }
reconciled() {
  local total depth
  total=$(msum controller_runtime_reconcile_total 2>/dev/null) || return 1
  depth=$(msum workqueue_depth 2>/dev/null) || return 1
  awk -v t="$total" -v d="$depth" -v want="$1" 'BEGIN {exit !(t >= want && d == 0)}'
}
# configmaps N [LABELS]: ConfigMaps cm-1 .. cm-N in $ns, each with data k: v
# and LABELS (a YAML flow mapping's insides, such as "app: reload"), made
# in one kubectl call
configmaps() {
  local i
  for i in $(seq 1 "$1"); do
    printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, labels: {%s}}\ndata: {k: v}\n' "$i" "${2:-}"
  done | kc create -n "$ns" -f - >/dev/null
}
# the namespaces of earlier benchmarks, still being deleted: gone first
for old in $(kc get namespaces -o name | sed -n 's|^namespace/\(bench-.*\)|\1|p'); do
  echo "bench: waiting for namespace $old, left by an earlier benchmark, to be deleted" >&2
  kc delete namespace "$old" --timeout=300s >/dev/null 2>&1 || true
done
kc create namespace "$ns" >/dev/null

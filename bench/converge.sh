#!/usr/bin/env bash
# bench/converge.sh [N]: the useless machine operator converging, against the
# local control plane (make cluster-up), in one run.
#
# With operators/useless-machine.lua running (--qps 0: no client-side rate
# limit, one worker as written), N Machines of 3 switches each are created at
# once (64 creates in flight); the time is taken until every Machine's
# status.positions reads "ddd" (seen through a watch). luaop's trace log
# counts the writes the operator made meanwhile (POST, PUT, PATCH, DELETE);
# then the same number of raw writes (ConfigMap creates, 64 in flight) is
# timed against the same API server. Prints both and their ratio.
n=${1:-1000}
. "$(dirname "$0")/lib.sh" converge
lo() { "$bin" --kubeconfig "$KUBECONFIG" --qps 0 "$@"; }
kc apply -k manifests/crds >/dev/null
kc wait --for condition=Established crd --all --timeout=60s >/dev/null

log=$tmp/luaop.log
script=operators/useless-machine.lua
if [ -n "${WORKERS:-}" ]; then # the same script with WORKERS workers
  sed "s/^  concurrency = [0-9]*,/  concurrency = $WORKERS,/" "$script" >"$tmp/useless-machine.lua"
  script=$tmp/useless-machine.lua
fi
port=${METRICS_PORT:-18471}
"$bin" --kubeconfig "$KUBECONFIG" --log-level trace --metrics-bind-address "127.0.0.1:$port" --script "$script" 2>"$log" &
pid=$!
wait_until "caches synced" grep -q "caches synced" "$log"

"$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/converge.lua -- watch "$ns" "$n" >"$tmp/watch" &
watcher=$!
wait_until "the watcher" grep -q ready "$tmp/watch"
lo --program bench/converge.lua -- machines "$ns" "$n" >"$tmp/create"
wait "$watcher"
field() { grep "^$1 " "$2" | cut -d' ' -f2; }
converge=$(echo "$(field end "$tmp/watch") - $(field start "$tmp/create")" | bc -l)
create=$(field seconds "$tmp/create")
curl -s "http://127.0.0.1:$port/metrics" >"$tmp/metrics"
writes=$(grep '"response"\|	response	' "$log" | grep -cE '"method": "(POST|PUT|PATCH|DELETE)"' || true)
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=

raw=$(lo --program bench/converge.lua -- raw "$ns" "$writes" | grep '^seconds' | cut -d' ' -f2)
printf 'machines %d: created in %.2f s, all positions "ddd" %.2f s after the first create\n' "$n" "$create" "$converge"
printf 'the operator wrote %d times; %d raw writes took %.2f s\n' "$writes" "$writes" "$raw"
printf 'ratio converge / raw writes: %.2f\n' "$(echo "$converge / $raw" | bc -l)"

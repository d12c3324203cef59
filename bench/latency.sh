#!/usr/bin/env bash
# bench/latency.sh [RATE] [SECONDS] [KEYS] [WORK_MS]: a controller's event-to-reconcile
# latency under a stream of updates, in one run against the local control
# plane (make cluster-up).
#
# In a fresh namespace with KEYS ConfigMaps (default 100), one luaop process
# runs a controller on them (bench/latency.lua controller) while another
# (bench/latency.lua writer, --qps 0) merge-patches them round-robin, paced at
# RATE a second (default 1000) for SECONDS (default 10). The controller
# process measures, for each update event, the time from the shared informer
# delivering it to the start of the reconcile that handles it (several
# updates of a key waiting in the queue collapse into one reconcile, which
# counts against the earliest), split at the moment a worker takes the key
# from the work queue (a probe on the controller's queue). WORK_MS (default 0) makes each reconcile
# sleep that long, so that the queue backs up and collapses updates. Prints p50, p99 and max, and the update rate
# achieved: the API server on the same machine may not take RATE.
rate=${1:-1000}
secs=${2:-10}
keys=${3:-100}
work=${4:-0}
. "$(dirname "$0")/lib.sh" latency
luaop() { "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/latency.lua -- "$@"; }
luaop create "$ns" "$keys"

"$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/latency.lua -- controller "$ns" "$tmp/ready" "$tmp/done" "$work" >"$tmp/controller" 2>"$tmp/controller.log" &
pid=$!
WAIT_SECONDS=30 wait_until "the controller" test -e "$tmp/ready" || { cat "$tmp/controller.log" >&2; exit 1; }
luaop writer "$ns" "$keys" "$rate" "$secs" >"$tmp/writer"
touch "$tmp/done"
wait "$pid"
pid=

get() { awk -v k="$2" '$1 == k {print $2}' "$tmp/$1"; }
patches=$(get writer patches) wsecs=$(get writer seconds)
printf 'writer: %d patches in %.2f s = %.0f/s (target %d/s, %d keys, %d errors)\n' \
  "$patches" "$wsecs" "$(echo "$patches / $wsecs" | bc -l)" "$rate" "$keys" "$(get writer errors)"
printf 'controller: %d update events (%.0f/s), %d reconciles (%s ms each), %d latencies measured, %.2f s CPU\n' \
  "$(get controller events)" "$(get controller event_rate)" "$(get controller reconciles)" "$work" \
  "$(get controller measured)" "$(get controller cpu_s)"
printf 'event -> reconcile start: p50 %.3f ms  p99 %.3f ms  max %.3f ms  (mean %.3f ms)\n' \
  "$(get controller p50_ms)" "$(get controller p99_ms)" "$(get controller max_ms)" "$(get controller mean_ms)"
printf '  event -> worker takes the key: p50 %.3f ms  p99 %.3f ms;  key taken -> reconcile starts: p50 %.3f ms  p99 %.3f ms\n' \
  "$(get controller queued_p50_ms)" "$(get controller queued_p99_ms)" "$(get controller started_p50_ms)" "$(get controller started_p99_ms)"

#!/usr/bin/env bash
# bench/timers.sh [KEYS] [SECONDS] [IDLE_SECONDS]: how the work queue keeps
# time, in one run (the idle part against the local control plane, make
# cluster-up).
#
# Lateness: KEYS keys (default 2000) delayed evenly over SECONDS (default 2)
# and taken as they come due (the queue's timer in C wakes the waiting task),
# beside the same delays slept on bare libuv timers (the loop's own limit).
# Goal: p99 within 2 ms, nothing early. Wake-ups: a controller whose one
# ConfigMap asks to be reconciled again in an hour; the loop's wake-ups over
# IDLE_SECONDS (default 10) of otherwise idle time. Goal: at most 5 in 10 s.
keys=${1:-2000}
secs=${2:-2}
idle=${3:-10}
. "$(dirname "$0")/lib.sh" timers
run() { "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/timers.lua -- "$@"; }
get() { awk -v k="$2" '$1 == k {print $2}' "$tmp/$1"; }

run lateness "$keys" "$secs" >"$tmp/lateness"
printf 'lateness of %d delayed keys over %s s: take p50 %.3f ms  p99 %.3f ms  max %.3f ms  (%d early)\n' \
  "$keys" "$secs" "$(get lateness take_p50_ms)" "$(get lateness take_p99_ms)" "$(get lateness take_max_ms)" \
  "$(get lateness take_early)"
printf '  bare libuv timers, the same delays:  p50 %.3f ms  p99 %.3f ms  max %.3f ms;  take p99 / timers p99 = %.2f\n' \
  "$(get lateness sleep_p50_ms)" "$(get lateness sleep_p99_ms)" "$(get lateness sleep_max_ms)" \
  "$(echo "$(get lateness take_p99_ms) / $(get lateness sleep_p99_ms)" | bc -l)"

kc create configmap hourly -n "$ns" --from-literal=k=v >/dev/null
run idle "$ns" "$idle" >"$tmp/idle"
printf 'wake-ups of the loop with one key delayed by an hour: %d in %s s (%d reconciled)\n' \
  "$(get idle wakeups)" "$(get idle seconds)" "$(get idle reconciled)"

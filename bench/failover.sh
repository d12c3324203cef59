#!/usr/bin/env bash
# bench/failover.sh: leader election's three times, in one run against the
# local control plane (make cluster-up), with client-go's default durations
# (lease 15 s, renew deadline 10 s, retry period 2 s):
#   - SIGKILL failover: the leader killed -> a standby holds the lease
#     (goal: at most lease duration + retry period, 17 s);
#   - SIGTERM handover: SIGTERM to the leader -> a standby holds the lease
#     (goal: at most 2 s: the leader drains, releases, the standby takes it
#     at its next try);
#   - acquiring -> first reconcile, in the new leader (goal: at most 10 ms:
#     its caches and queues are warm, no LIST is made).
# Times from luaop's own log lines (millisecond timestamps; the kill's from
# date(1)). Each luaop runs a controller on 20 ConfigMaps of a fresh
# namespace that logs each reconcile.
. "$(dirname "$0")/lib.sh" failover
configmaps 20
mkdir -p "$tmp/scripts"
cat >"$tmp/scripts/c.lua" <<LUA
local luaop = require "luaop"
return luaop.controller {
  name = "c", resource = "v1/ConfigMap", namespace = "$ns",
  reconcile = function(ctx, req) ctx.log:info("reconciled") end,
}
LUA
flags=(--kubeconfig "$KUBECONFIG" --script "$tmp/scripts" --leader-elect --leader-election-id failover
       --leader-election-namespace "$ns")
pid_a= pid_b= pid_c=
trap 'kill $pid_a $pid_b $pid_c 2>/dev/null; bench_cleanup' EXIT
start() { "$bin" "${flags[@]}" >/dev/null 2>"$tmp/$1.log" & eval "pid_$1=$!"; }
ms() { # the ms timestamp of the first line of log $1 matching $2
  grep -m1 "$2" "$tmp/$1.log" | cut -f1 | { read -r t; date -d "$t" +%s%3N; }
}
acquired() { grep -q "successfully acquired lease" "$tmp/$1.log"; }

start a; pid=$pid_a
wait_until "a to lead" acquired a
start b
wait_until "b's caches" grep -q "caches synced" "$tmp/b.log"
sleep 1
kill -KILL "$pid_a"; killed=$(date +%s%3N); pid=$pid_b
WAIT_SECONDS=40 wait_until "b to lead" acquired b
sigkill=$(( $(ms b "successfully acquired lease") - killed ))
wait_until "b's first reconcile" grep -q reconciled "$tmp/b.log"
first_b=$(( $(ms b reconciled) - $(ms b "successfully acquired lease") ))

start c
wait_until "c's caches" grep -q "caches synced" "$tmp/c.log"
sleep 1
kill -TERM "$pid_b"; pid=$pid_c
WAIT_SECONDS=20 wait_until "c to lead" acquired c
sigterm=$(( $(ms c "successfully acquired lease") - $(ms b '"signal": "SIGTERM"') ))
wait_until "c's first reconcile" grep -q reconciled "$tmp/c.log"
first_c=$(( $(ms c reconciled) - $(ms c "successfully acquired lease") ))
wait "$pid_b" 2>/dev/null || true

printf 'SIGKILL failover     %6d ms   goal <= 17000 ms (lease + retry)   ratio %.2f\n' "$sigkill" "$(echo "$sigkill / 17000" | bc -l)"
printf 'SIGTERM handover     %6d ms   goal <= 2000 ms                    ratio %.2f\n' "$sigterm" "$(echo "$sigterm / 2000" | bc -l)"
printf 'acquired -> first reconcile: %d ms after SIGKILL, %d ms after SIGTERM   goal <= 10 ms\n' "$first_b" "$first_c"

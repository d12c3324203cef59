#!/usr/bin/env bash
# bench/probes.sh [SECONDS]: how fast /healthz, /readyz and /metrics answer
# while luaop reconciles, alone and during a flood of bad clients (idle
# connections, slow clients, oversized headers, junk: bench/probes.py), in
# one run against the local control plane (make cluster-up).
#
# A controller keeps its loop busy (100 ConfigMaps, each reconciled again
# every 10 ms); the servers run on threads of their own. Prints p50 and p99
# of each path (a new connection per request) in both phases, the p99's
# ratio flood / alone, and the reconciles a second in both phases (the
# flood must not slow them). SECONDS (default 5) per phase.
secs=${1:-5}
. "$(dirname "$0")/lib.sh" probes
configmaps 100
mkdir -p "$tmp/scripts"
cat >"$tmp/scripts/ticker.lua" <<LUA
local luaop = require "luaop"
return luaop.controller {
  name = "ticker", resource = "v1/ConfigMap", namespace = "$ns", concurrency = 4,
  reconcile = function(ctx, req) return luaop.requeue_after(0.01) end,
}
LUA
"$bin" --kubeconfig "$KUBECONFIG" --script "$tmp/scripts" --metrics-bind-address 127.0.0.1:0 \
  --health-probe-bind-address 127.0.0.1:0 2>"$tmp/log" &
pid=$!
wait_until "caches synced" grep -q "caches synced" "$tmp/log"
mport=$(sed -n 's/.*Serving metrics server.*"port": \([0-9]*\).*/\1/p' "$tmp/log")
pport=$(sed -n 's/.*"name": "health probe".*"port": \([0-9]*\).*/\1/p' "$tmp/log")
python3 bench/probes.py "$mport" "$pport" "$secs"

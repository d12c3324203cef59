#!/usr/bin/env bash
# bench/shard.sh [N] [NAMESPACES]: what sharding saves each replica, in one
# run against the local control plane (make cluster-up). docs/sharding.md.
#
# Creates N ConfigMaps (default 100000) of about 1 KiB across NAMESPACES
# namespaces (default 300; bench/shard.lua). Then, for each way the server
# can serve a sharded informer:
#   server  luaop talks to the API server: a server with ShardedListAndWatch
#           applies the shardSelector (the local control plane's does);
#   client  luaop talks to it through the chaos proxy (hack/chaos) with
#           -strip-shard-selector configmaps and no faults: the server
#           sends everything and luaop filters,
# it runs one replica alone in a ring, then three in another (started
# together), each with a ConfigMap controller that shards by namespace and
# reconciles nothing, and waits until the ring has settled: the replicas'
# luaop_shard_share adds up to 1 and their luaop_cache_objects to N. Per
# replica: launch to settled, VmRSS, bytes read (/proc/PID/io rchar: the
# API server's answers, mostly), CPU (utime + stime) and objects cached.
# Prints each three-replica figure over the one replica's: the goal is at
# most 0.4 for memory either way, and with the server sharding at most 0.4
# for bytes and CPU too (about 1.0 for those when luaop filters: the cost
# KEP-5866 removes).
n=${1:-100000}
nns=${2:-300}
. "$(dirname "$0")/lib.sh" shard
prefix=$ns
lns() { "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/shard.lua -- "$@"; }
cleanup_shard() {
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  kc delete namespace -l bench-shard="$prefix" --wait=false >/dev/null 2>&1 || true
  bench_cleanup
}
trap cleanup_shard EXIT
lns "$prefix" "$nns" "$n" >"$tmp/create"
echo "created $n ConfigMaps in $nns namespaces in $(awk '{print $2}' "$tmp/create") s"

mkdir -p "$tmp/scripts"
cat >"$tmp/scripts/shard.lua" <<'LUA'
local luaop = require "luaop"
return luaop.controller { name = "bench-shard", resource = "v1/ConfigMap", label_selector = "bench=shard",
  reconcile = function() end }
LUA

# the chaos proxy, dropping shardSelector for ConfigMaps only
chaos=$(hack/chaos.sh bin)
mkdir -p "$tmp/chaos"
kc config view --raw --minify --flatten -o json >"$tmp/chaos/upstream.json"
"$chaos" -upstream "$tmp/chaos/upstream.json" -dir "$tmp/chaos" -rate 0 -watch-rate 0 \
  -strip-shard-selector configmaps 2>"$tmp/chaos/log" &
WAIT_SECONDS=30 wait_until "the chaos proxy" test -s "$tmp/chaos/kubeconfig"

port=18400
metric() { # PORT NAME: the sum of a metric's series
  curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.6f", s + 0}'
}
proc_stat() { # PID: rss_kib rchar cpu_ticks
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status" | tr '\n' ' '
  awk '/^rchar:/ {print $2}' "/proc/$1/io" | tr '\n' ' '
  awk '{print $14 + $15}' "/proc/$1/stat"
}
tck=$(getconf CLK_TCK)

# run MODE R: R replicas of a fresh ring; one line per replica:
# MODE R secs rss_kib rchar cpu_s objects
run() {
  local mode=$1 r=$2 kubeconfig=$KUBECONFIG pids=() ports=() i start
  [ "$mode" = client ] && kubeconfig=$tmp/chaos/kubeconfig
  local ring="bench-$mode-$r-$$"
  start=$(date +%s.%N)
  for i in $(seq 1 "$r"); do
    port=$((port + 1))
    "$bin" --kubeconfig "$kubeconfig" --script "$tmp/scripts" --shard-ring "$ring" --shard-namespace "$ns" \
      --metrics-bind-address "127.0.0.1:$port" --log-level info 2>"$tmp/$ring-$i.log" &
    pids+=("$!")
    ports+=("$port")
  done
  settled() {
    local share=0 objs=0 p
    for p in "${ports[@]}"; do
      share=$(echo "$share + $(metric "$p" luaop_shard_share)" | bc -l)
      objs=$(echo "$objs + $(metric "$p" luaop_cache_objects)" | bc -l)
    done
    [ "$(echo "$share > 0.999999 && $share < 1.000001" | bc -l)" = 1 ] && [ "$(printf '%.0f' "$objs")" = "$n" ]
  }
  WAIT_SECONDS=600 wait_until "ring $ring to settle" settled
  local secs
  secs=$(echo "$(date +%s.%N) - $start" | bc -l)
  for i in "${!pids[@]}"; do
    read -r rss rchar ticks < <(proc_stat "${pids[$i]}")
    printf '%s %d %.2f %d %d %.2f %.0f\n' "$mode" "$r" "$secs" "$rss" "$rchar" "$(echo "$ticks / $tck" | bc -l)" \
      "$(metric "${ports[$i]}" luaop_cache_objects)"
  done
  for i in "${!pids[@]}"; do kill "${pids[$i]}"; wait "${pids[$i]}" 2>/dev/null || true; done
}

for mode in server client; do
  run "$mode" 1 >>"$tmp/out"
  run "$mode" 3 >>"$tmp/out"
done
mode_seen=$(grep -ho 'the API server [a-z ]*shard[a-z ]*' "$tmp"/bench-server-1-*.log | head -1)
echo "luaop directly: $mode_seen"
awk '
  { k = $1 " " $2; n[k]++; secs[k] = $3; rss[k] += $4; rc[k] += $5; cpu[k] += $6; obj[k] += $7
    if ($4 > maxrss[k]) maxrss[k] = $4; if ($5 > maxrc[k]) maxrc[k] = $5; if ($6 > maxcpu[k]) maxcpu[k] = $6 }
  END {
    printf "%-7s %-9s %8s %10s %12s %8s %9s\n", "mode", "replicas", "settled", "VmRSS MiB", "read MiB", "CPU s", "objects"
    for (m = 0; m < 2; m++) { mode = m ? "client" : "server"
      for (r = 1; r <= 3; r += 2) { k = mode " " r
        printf "%-7s %-9s %7.1fs %10.1f %12.1f %8.2f %9d   (per replica, the largest)\n", mode, r, secs[k], maxrss[k]/1024, maxrc[k]/1048576, maxcpu[k], obj[k]/n[k] } 
      o = mode " 1"; t = mode " 3"
      printf "%-7s 3 over 1:  VmRSS %.2f   bytes read %.2f   CPU %.2f   (goal: VmRSS <= 0.4%s)\n", mode,
        maxrss[t]/maxrss[o], maxrc[t]/maxrc[o], maxcpu[t]/maxcpu[o], mode == "server" ? ", bytes and CPU <= 0.4" : "; bytes and CPU about 1.0"
    }
  }' "$tmp/out"

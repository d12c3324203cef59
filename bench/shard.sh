#!/usr/bin/env bash
# bench/shard.sh [N] [NAMESPACES]: what sharding saves each replica, in one
# run against the local control plane (make cluster-up). docs/sharding.md.
#
# Creates N ConfigMaps (default 100000) of about 1 KiB across NAMESPACES
# namespaces (default 300; bench/cache.lua create). Then, for each way the server
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
# replica: launch to settled, and then VmRSS, bytes received (its TCP
# connections' bytes_received, ss -ti), CPU (utime + stime) and objects
# cached; then once quiet (every reconcile the sync queued done, and each
# replica's VmRSS steady for 3 s: luaop ends the sync's collection cycle
# when it goes quiet) VmRSS, VmHWM and CPU again: the cost of the sync and
# of reconciling what it brought, the fair one to compare (at "settled"
# one replica has its 100,000 reconciles still to run).
# Decode CPU: where perf is (PERF=0: not), each replica's CPU clock is
# sampled with call stacks (499 Hz) from launch to quiet; the samples whose
# stack holds the JSON decoder, over all, times its CPU once quiet.
# Prints each three-replica figure over the one replica's (the largest of
# the three each time): the goal is at most 0.4 for memory either way, and
# with the server sharding at most 0.4 for bytes received and decode CPU
# too (bytes about 1.0 when luaop filters: the cost KEP-5866 removes).
# ROUNDS=K (default 1) runs this part K times and prints each ratio's
# median with its min and max.
#
# Then the useless machine (operators/useless-machine.lua, shard_by "uid":
# its Machines are in one namespace) converges MACHINES Machines (default
# 3000; bench/converge.lua) with one replica and with three: the time to
# every Machine "ddd", the writes each replica made in the Machines'
# namespace (its trace log: Switches, Machines' status, Events) and those
# by what they wrote (and the ring's Lease writes), the 409s, and CPU per
# replica. On two cores the API server is
# the limit: where the time goes, not a speed-up.
#
# PARTS="memory handover converge" (the default) runs all three; name
# fewer to run fewer.
n=${1:-100000}
nns=${2:-300}
machines=${3:-3000}
. "$(dirname "$0")/lib.sh" shard
prefix=$ns
replicas=() # every luaop started, stopped at exit by PID
cleanup_shard() {
  local p
  for p in "${replicas[@]}" $(jobs -p); do kill "$p" 2>/dev/null || true; done
  kc delete namespace -l bench-shard="$prefix" --wait=false >/dev/null 2>&1 || true
  bench_cleanup
}
trap cleanup_shard EXIT
"$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/cache.lua -- create "$prefix" "$n" 1 "$nns" >"$tmp/create"
echo "created $n ConfigMaps in $nns namespaces in $(awk '{print $2}' "$tmp/create") s"

mkdir -p "$tmp/scripts"
cat >"$tmp/scripts/shard.lua" <<'LUA'
local luaop = require "luaop"
return luaop.controller { name = "bench-shard", resource = "v1/ConfigMap", label_selector = "bench=cache",
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
metric() { # PORT NAME [MATCH]: the sum of a metric's series (those whose labels hold MATCH)
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v m="$2" -v w="${3:-}" '$1 ~ "^"m"({|$)" && index($1, w) {s += $2} END {printf "%.6f", s + 0}'
}
proc_stat() { # PID: rss_kib bytes_received cpu_ticks
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status" | tr '\n' ' '
  # what its TCP connections received (tcp_info's bytes_received, ss -ti):
  # luaop keeps one HTTP/2 connection to the API server (or the proxy)
  ss -tinpH 2>/dev/null | awk -v p="pid=$1," '
    index($0, p) {mine = 1; next}
    mine && match($0, /bytes_received:[0-9]+/) {s += substr($0, RSTART + 15, RLENGTH - 15)}
    {mine = 0}
    END {printf "%d ", s}'
  awk '{print $14 + $15}' "/proc/$1/stat"
}
tck=$(getconf CLK_TCK)
# decode CPU, where perf can sample (PERF=0 turns it off): the share of a
# replica's CPU-clock samples whose stack holds the JSON decoder
# (json_dec_value: a watch event, a LIST page), times its CPU once quiet
perf=
[ "${PERF:-1}" != 0 ] && command -v perf >/dev/null && perf=perf
decode_share() { # PERF.DATA: decoding samples over all samples, or "-" (none: not measured)
  [ -s "$1" ] || { echo -; return; }
  perf script -i "$1" 2>/dev/null | awk '
    /^$/ {if (inside) {n++; d += dec}; inside = 0; dec = 0; next}
    {inside = 1; if ($0 ~ /json_dec_value/) dec = 1}
    END {if (inside) {n++; d += dec}; if (n && d) printf "%.4f", d / n; else print "-"}'
}

# served [K]: the ring of the caller's replicas (its arrays pids and ports)
# serves everything: the live replicas' (those whose PID is still there)
# luaop_shard_share adds up to 1 and their luaop_cache_objects to N; with
# K, replica K (0-based) holds some of it too
served() {
  local share=0 objs=0 k
  for k in "${!ports[@]}"; do
    kill -0 "${pids[$k]}" 2>/dev/null || continue
    share=$(echo "$share + $(metric "${ports[$k]}" luaop_shard_share)" | bc -l)
    objs=$(echo "$objs + $(metric "${ports[$k]}" luaop_cache_objects 'resource="v1/ConfigMap"')" | bc -l)
  done
  [ "$(echo "$share > 0.9999 && $share < 1.0001" | bc -l)" = 1 ] && [ "$(printf '%.0f' "$objs")" = "$n" ] &&
    { [ -z "${1:-}" ] || [ "$(echo "$(metric "${ports[$1]}" luaop_shard_share) > 0" | bc -l)" = 1 ]; }
}

# run MODE R: R replicas of a fresh ring; one line per replica:
# MODE R secs rss_kib rchar cpu_s objects
run() {
  local mode=$1 r=$2 kubeconfig=$KUBECONFIG pids=() ports=() perfs=() i start
  [ "$mode" = client ] && kubeconfig=$tmp/chaos/kubeconfig
  local ring="bench-$mode-$r-$$"
  start=$(date +%s.%N)
  for i in $(seq 1 "$r"); do
    port=$((port + 1))
    "$bin" --kubeconfig "$kubeconfig" --script "$tmp/scripts" --shard-ring "$ring" --shard-namespace "$ns" \
      --metrics-bind-address "127.0.0.1:$port" --log-level info 2>"$tmp/$ring-$i.log" &
    pids+=("$!")
    replicas+=("$!")
    ports+=("$port")
    # decode CPU: perf samples the replica's CPU clock with its call stacks
    if [ -n "$perf" ]; then
      perf record -q -e cpu-clock -F 499 --call-graph dwarf,4096 -p "$!" -o "$tmp/perf-$ring-$i.data" >/dev/null 2>&1 &
      perfs+=("$!")
    fi
  done
  WAIT_SECONDS=600 wait_until "ring $ring to settle" served
  local secs stats=()
  secs=$(echo "$(date +%s.%N) - $start" | bc -l)
  for i in "${!pids[@]}"; do stats+=("$(proc_stat "${pids[$i]}")"); done
  # then once quiet: every reconcile the sync queued done (each replica's
  # workqueue_depth 0) and each replica's VmRSS within 1% of itself 3 s
  # before (luaop finishes the sync's collection cycle when it goes
  # quiet: luaop.collector), at most 120 s: VmRSS, VmHWM and CPU again
  local hist=() t
  quiet() {
    local i now old
    for i in "${!ports[@]}"; do
      [ "$(metric "${ports[$i]}" workqueue_depth)" = 0.000000 ] || { hist=(); return 1; }
    done
    hist+=("$(for i in "${!pids[@]}"; do awk '/^VmRSS:/ {printf "%s ", $2}' "/proc/${pids[$i]}/status"; done)")
    [ "${#hist[@]}" -gt 6 ] || return 1
    now=(${hist[-1]})
    old=(${hist[-7]})
    for i in "${!now[@]}"; do
      [ "$(echo "${now[$i]} <= ${old[$i]} * 1.01 && ${now[$i]} >= ${old[$i]} * 0.99" | bc -l)" = 1 ] || return 1
    done
  }
  for t in $(seq 1 240); do quiet && break; sleep 0.5; done
  local cpuq=()
  for i in "${!pids[@]}"; do cpuq+=("$(awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/${pids[$i]}/stat")"); done
  for i in "${!perfs[@]}"; do kill -INT "${perfs[$i]}" 2>/dev/null || true; wait "${perfs[$i]}" 2>/dev/null || true; done
  for i in "${!pids[@]}"; do
    read -r rss rchar ticks <<<"${stats[$i]}"
    printf '%s %d %.2f %d %d %.2f %.0f %d %d %.2f %s\n' "$mode" "$r" "$secs" "$rss" "$rchar" "$(echo "$ticks / $tck" | bc -l)" \
      "$(metric "${ports[$i]}" luaop_cache_objects 'resource="v1/ConfigMap"')" \
      "$(awk '/^VmRSS:/ {print $2}' "/proc/${pids[$i]}/status")" "$(awk '/^VmHWM:/ {print $2}' "/proc/${pids[$i]}/status")" \
      "${cpuq[$i]}" "$(decode_share "$tmp/perf-$ring-$((i + 1)).data")"
  done
  for i in "${!pids[@]}"; do kill "${pids[$i]}"; wait "${pids[$i]}" 2>/dev/null || true; done
}

# handover: three replicas (server mode) settled, then a fourth joins, then
# one leaves (SIGTERM: it releases its ranges), then one is killed
# (SIGKILL: its Lease must expire first); each time, from the change to
# every range served again (the live replicas' luaop_shard_share adding up
# to 1, the newcomer holding some) with every object cached (luaop_cache_objects
# adding up to N). The ring's timings are luaop's defaults (lease 15 s,
# renew deadline 10 s, retry period 2 s).
handover() {
  local ring="bench-handover-$$" pids=() ports=() i t0
  start_one() {
    port=$((port + 1))
    "$bin" --kubeconfig "$KUBECONFIG" --script "$tmp/scripts" --shard-ring "$ring" --shard-namespace "$ns" \
      --metrics-bind-address "127.0.0.1:$port" --log-level info 2>"$tmp/$ring-$((${#pids[@]} + 1)).log" &
    pids+=("$!")
    replicas+=("$!")
    ports+=("$port")
  }
  for i in 1 2 3; do start_one; done
  WAIT_SECONDS=600 wait_until "ring $ring to settle" served
  t0=$(date +%s.%N)
  start_one
  WAIT_SECONDS=120 wait_until "the fourth replica to serve" served 3
  echo "handover join $(echo "$(date +%s.%N) - $t0" | bc -l)"
  t0=$(date +%s.%N)
  kill -TERM "${pids[0]}"
  WAIT_SECONDS=120 wait_until "the ring to serve without the first" bash -c "! kill -0 ${pids[0]} 2>/dev/null"
  WAIT_SECONDS=120 wait_until "the ring to serve without the first" served
  echo "handover leave $(echo "$(date +%s.%N) - $t0" | bc -l)"
  t0=$(date +%s.%N)
  kill -KILL "${pids[1]}"
  wait "${pids[1]}" 2>/dev/null || true
  WAIT_SECONDS=120 wait_until "the ring to serve without the second" served
  echo "handover kill $(echo "$(date +%s.%N) - $t0" | bc -l)"
  for i in "${!pids[@]}"; do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
}

parts=${PARTS:-memory handover converge}
rounds=${ROUNDS:-1}
if [[ " $parts " == *" memory "* ]]; then
  for round in $(seq 1 "$rounds"); do
    for mode in server client; do
      # (not in a pipeline: run's replicas and ports stay this shell's, for the cleanup)
      run "$mode" 1 >"$tmp/round"
      run "$mode" 3 >>"$tmp/round"
      sed "s/\$/ $round/" "$tmp/round" >>"$tmp/out"
    done
  done
fi
# converge R: the useless machine with R replicas, MACHINES Machines in a
# namespace of their own
kc apply -k manifests/crds >/dev/null
kc wait --for condition=Established crd --all --timeout=60s >/dev/null
mkdir -p "$tmp/umscript"
sed 's/^  concurrency = \([0-9]*\),/  concurrency = \1, shard_by = "uid",/' operators/useless-machine.lua >"$tmp/umscript/useless-machine.lua"
grep -q 'shard_by = "uid"' "$tmp/umscript/useless-machine.lua" || { echo "bench: could not set shard_by in the useless machine" >&2; exit 1; }
converge() {
  local r=$1 cns="$ns-m$1" pids=() i start
  local ring="bench-um-$r-$$"
  kc create namespace "$cns" >/dev/null
  kc label namespace "$cns" bench-shard="$prefix" >/dev/null
  for i in $(seq 1 "$r"); do
    "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --log-level trace --script "$tmp/umscript" --shard-ring "$ring" \
      --shard-namespace "$ns" 2>"$tmp/um-$r-$i.log" &
    pids+=("$!")
    replicas+=("$!")
  done
  for i in $(seq 1 "$r"); do WAIT_SECONDS=120 wait_until "replica $i" grep -q "acquired ranges" "$tmp/um-$r-$i.log"; done
  "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/converge.lua -- watch "$cns" "$machines" >"$tmp/um-watch-$r" &
  local watcher=$!
  wait_until "the watcher" grep -q ready "$tmp/um-watch-$r"
  "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/converge.lua -- machines "$cns" "$machines" >"$tmp/um-create-$r"
  WAIT_SECONDS=900 wait_until "every Machine ddd" bash -c "! kill -0 $watcher 2>/dev/null"
  local secs
  secs=$(echo "$(grep '^end ' "$tmp/um-watch-$r" | cut -d' ' -f2) - $(grep '^start ' "$tmp/um-create-$r" | cut -d' ' -f2)" | bc -l)
  for i in "${!pids[@]}"; do
    local log=$tmp/um-$r-$((i + 1)).log w c cpu kinds
    w=$(grep 'response' "$log" | grep -E '"method": "(POST|PUT|PATCH|DELETE)"' | grep -c "/namespaces/$cns/" || true)
    c=$(grep 'response' "$log" | grep -E '"method": "(POST|PUT|PATCH|DELETE)"' | grep "/namespaces/$cns/" |
      grep -c '"status": 409' || true)
    # every write by what it wrote: METHOD/resource[/subresource]=count,...
    kinds=$(grep 'response' "$log" | grep -oE '"method": "(POST|PUT|PATCH|DELETE)", "path": "[^"?]*' |
      grep -E "/namespaces/($cns|$ns)/" |
      awk -F'"' '{n = split($8, p, "/"); r = p[n]; if (p[n - 1] == "namespaces" || n < 4) r = p[n]
        else if ($4 == "POST") r = p[n]; else if (p[n] == "status") r = p[n - 2] "/status"; else r = p[n - 1]
        k[$4 "/" r]++} END {for (x in k) printf "%s%s=%d", (s++ ? "," : ""), x, k[x]}')
    cpu=$(awk '{print $14 + $15}' "/proc/${pids[$i]}/stat")
    printf 'um %d %.2f %d %d %.2f %s\n' "$r" "$secs" "$w" "$c" "$(echo "$cpu / $tck" | bc -l)" "$kinds"
  done
  for i in "${!pids[@]}"; do kill "${pids[$i]}"; wait "${pids[$i]}" 2>/dev/null || true; done
  # gone before the next run: its Machines would be the next replicas' to
  # reconcile (they watch every namespace), with writes of their own
  kc delete namespace "$cns" --wait=true --timeout=600s >/dev/null
}
if [[ " $parts " == *" handover "* ]]; then
  handover >"$tmp/handover"
fi
if [[ " $parts " == *" converge "* ]]; then
  converge 1 >>"$tmp/um"
  converge 3 >>"$tmp/um"
fi

if [ -s "$tmp/out" ]; then
mode_seen=$(grep -ho 'the API server [a-z ]*shard[a-z ]*' "$tmp"/bench-server-1-*.log | head -1)
echo "luaop directly: $mode_seen"
awk -v rounds="$rounds" '
  # per round (field 12), mode and replicas: the largest replica of each figure
  { k = $12 " " $1 " " $2; secs[k] = $3; if ($7 > obj[k]) obj[k] = $7
    if ($4 > rss[k]) rss[k] = $4; if ($5 > rc[k]) rc[k] = $5; if ($6 > cpu[k]) cpu[k] = $6
    if ($8 > q[k]) q[k] = $8; if ($9 > h[k]) h[k] = $9; if ($10 > cq[k]) cq[k] = $10
    if ($11 == "-" || $11 + 0 == 0) nod = 1; else if ($11 * $10 > dec[k]) dec[k] = $11 * $10 }
  function verdict(v) { return v == "-" ? "not measured" : v <= 0.4 ? "met" : "not met" }
  function med(a, c,   i, j, t) { # the median of a[1..c] (sorts a)
    for (i = 2; i <= c; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2 }
  function ratio(name, arr, mode,   x, i) { # three over one of arr per round: "median (min-max)", and median in R
    # (a figure of one replica that is 0 or missing was not measured: "-", R not a number)
    for (i = 1; i <= rounds; i++) {
      if (!arr[i " " mode " 1"]) { R = "-"; return "- (not measured)" }
      x[i] = arr[i " " mode " 3"] / arr[i " " mode " 1"] }
    R = med(x, rounds)
    return rounds == 1 ? sprintf("%.2f", R) : sprintf("%.2f (%.2f-%.2f)", R, x[1], x[rounds]) }
  END {
    printf "%-5s %-7s %-9s %8s %14s %11s %10s %10s %12s %10s %11s %9s\n", "round", "mode", "replicas", "settled", "VmRSS settled",
      "VmRSS quiet", "VmHWM MiB", "recv MiB", "CPU settled", "CPU quiet", "decode CPU", "objects"
    for (i = 1; i <= rounds; i++) for (m = 0; m < 2; m++) for (r = 1; r <= 3; r += 2) {
      mode = m ? "client" : "server"; k = i " " mode " " r
      printf "%-5s %-7s %-9s %7.1fs %14.1f %11.1f %10.1f %10.1f %12.2f %10.2f %11s %9d   (per replica, the largest)\n", i, mode, r,
        secs[k], rss[k]/1024, q[k]/1024, h[k]/1024, rc[k]/1048576, cpu[k], cq[k], nod ? "-" : sprintf("%.2f", dec[k]), obj[k] }
    head = "three replicas over one, the largest of each figure"
    print rounds == 1 ? head ":" : head ": the median of " rounds " rounds (min-max)"
    for (m = 0; m < 2; m++) { mode = m ? "client" : "server"
      vq = ratio("", q, mode); rq = R; vb = ratio("", rc, mode); rb = R
      vd = nod ? "- (not measured: no perf, or no decoder frame in its samples)" : ratio("", dec, mode); rd = R
      printf "%-7s VmRSS quiet %s (settled %s, peak %s)   bytes received %s   decode CPU %s   CPU quiet %s (settled %s)\n",
        mode, vq, ratio("", rss, mode), ratio("", h, mode), vb, vd, ratio("", cq, mode), ratio("", cpu, mode)
      if (mode == "server")
        printf "        goal VmRSS quiet <= 0.4: %s; bytes received <= 0.4: %s; decode CPU <= 0.4: %s\n",
          verdict(rq), verdict(rb), nod ? "not measured" : verdict(rd)
      else
        printf "        goal VmRSS quiet <= 0.4: %s; bytes received about 1.0 (the cost KEP-5866 removes; luaop decodes only its own)\n",
          verdict(rq)
    }
  }' "$tmp/out"
fi
if [ -s "$tmp/handover" ]; then
  awk '{printf "handover, 3 replicas and %s: every range served again %.1f s after the change\n",
    $2 == "join" ? "a fourth joining" : $2 == "leave" ? "one leaving (SIGTERM)" : "one killed (SIGKILL)", $3}' "$tmp/handover"
fi
[ -s "$tmp/um" ] && awk -v m="$machines" '
  { n[$2]++; secs[$2] = $3; w[$2] += $4; c[$2] += $5; cpu[$2] += $6; per[$2] = per[$2] sprintf(" %d", $4)
    split($7, kv, ","); for (i in kv) { split(kv[i], x, "="); by[$2, x[1]] += x[2]; kinds[x[1]] = 1 } }
  END {
    for (r = 1; r <= 3; r += 2) {
      printf "useless machine, %d Machines, %d replica(s): all ddd in %.1f s, %d writes of its namespace (per replica:%s), %d Conflicts, CPU %.2f s in all\n",
        m, r, secs[r], w[r], per[r], c[r], cpu[r]
      line = ""; for (k in kinds) if (by[r, k]) line = line sprintf(" %s %d", k, by[r, k])
      printf "  every write, by what it wrote:%s\n", line
    }
  }' "$tmp/um"

#!/usr/bin/env bash
# bench/scale.sh - how luaop's cost grows with the objects it caches,
# against the better controller-runtime peer (bench/peer, built by
# bench/peer.sh, run with --strip-managed-fields: its cheaper form), on the
# local control plane (make cluster-up), taking turns, in one run.
#
# For each KIND of KINDS (default "ConfigMap Pod") and each N of SIZES
# (default "1000 10000 100000 300000"), N objects of KIND are made in a
# namespace of their own (bench/scale.lua create: ConfigMaps of about 1 KiB
# of compact JSON, or Pods bound to the kwok node by spec.nodeName so that
# the scheduler is not the bottleneck, each given the Running status kwok
# would give it by a write of the benchmark's own: kwok writes about 100
# Pod statuses a second here, so 300k Pods would wait some 50 minutes for
# it), more as N grows (for Pods, then until none is Pending:
# bench/scale.lua settle, so no status write loads the API server under
# what is measured); then, for each
# implementation, in turns (the one going first alternating), a controller
# on every object of KIND whose reconcile does nothing (bench/configmaps.lua
# or bench/pods.lua; the peer's "configmaps" or "pods"):
#
#   synced    launch to "caches synced", s
#   rss, hwm  VmRSS and VmHWM, KiB, SETTLE s after every object was reconciled
#   cpu       CPU per event, us: the process's CPU time over RATE changes a
#             second for CHURN s (bench/scale.lua churn; default 200 for
#             20 s: a rate this API server sustains beside the rest; the
#             rate achieved is printed), divided by the changes made
#   p50, p99  event to reconcile, ms: from the time its event queued a key
#             to the reconcile that took it, from the process's own
#             workqueue_queue_duration_seconds histogram over the churn
#             (both serve client-go's buckets; linear within a bucket)
#
# The API server serves the benchmark alone: while each kind's objects are
# made and measured, kube-controller-manager, kube-scheduler and kwok are
# stopped (hack/cluster.sh pause-controllers; they would watch every
# object too, the scheduler and kwok every Pod, and at 160k Pods the
# three took as much CPU as the API server), for both implementations
# alike; they are started again before the namespace is deleted (the
# namespace controller), and at exit whatever happened.
#
# Sizing for 300k objects: kwokctl gives etcd an 8 GiB backend quota
# (--quota-backend-bytes, read from the running etcd and checked: at least
# 1 GiB for each 100k objects asked for); each kind's objects are deleted
# after its sizes (100 deletes at once), then its namespace, and etcd is
# compacted (hack/cluster.sh compact) so that
# the old revisions of 300k objects do not fill it; the API server keeps
# every object in its watch cache (about 1 GiB of heap at 300k Pods): the
# script checks that MemAvailable holds 4 KiB for each object first.
#
# Prints a table (the medians of ROUNDS rounds, default 1, with min and max)
# and the run time with its goal, an hour for one round (with ROUNDS > 1,
# the time the rounds after the first took is left out of it), writes every value to $OUT/results.tsv (default
# build/bench/scale) and draws log-log charts with gnuplot (hack/deps.sh
# bench): $OUT/scale-KIND-MEASURE.svg.
sizes=${SIZES:-"1000 10000 100000 300000"}
kinds=${KINDS:-"ConfigMap Pod"}
rate=${RATE:-200}
churn=${CHURN:-20}
settle=${SETTLE:-5}
rounds=${ROUNDS:-1}
. "$(dirname "$0")/lib.sh" scale
out=${OUT:-build/bench/scale}
mkdir -p "$out"
results=$out/results.tsv
: >"$results"
peer=$(bench/peer.sh) || { echo "bench: could not build the peer (bench/peer.sh)" >&2; exit 1; }
port=${METRICS_PORT:-18492}
started=$SECONDS
extra=0 # the seconds rounds after the first took: a one-round run is the rest

record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$results"; } # IMPL KIND MEASURE N VALUE
# the queue-wait histogram: "le count" lines, summed over the process's queues
buckets() {
  metrics | awk '/^workqueue_queue_duration_seconds_bucket\{/ {
    match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); c[le] += $NF
  } END {for (le in c) print le, c[le]}' | sort -g
}
# pct BEFORE AFTER P: the P-th percentile (ms) of what the histogram counted
# between the two reads, linear within its bucket
pct() {
  awk -v p="$3" 'FILENAME == ARGV[1] {b[$1] = $2; next}
    {le[++n] = $1; d[n] = $2 - b[$1]}
    END {
      total = d[n]; if (total <= 0) {print "nan"; exit}
      want = p / 100 * total; lo = 0; prev = 0
      for (i = 1; i <= n; i++) {
        if (d[i] >= want) {
          hi = (le[i] == "+Inf") ? lo : le[i]
          f = (d[i] > prev) ? (want - prev) / (d[i] - prev) : 1
          printf "%.3f\n", (lo + f * (hi - lo)) * 1000; exit
        }
        lo = le[i]; prev = d[i]
      }
    }' "$1" "$2"
}

# etcd's quota and the memory the API server's watch cache needs
largest=$(printf '%s\n' $sizes | sort -g | tail -1)
nkinds=$(printf '%s\n' $kinds | wc -l)
quota=$(tr '\0' '\n' <"/proc/$(pgrep -x etcd | head -1)/cmdline" 2>/dev/null | sed -n 's/^--quota-backend-bytes=//p')
if [ -n "$quota" ] && [ "$quota" -lt $((largest * nkinds / 100000 * 1073741824)) ]; then
  echo "bench: etcd's backend quota is $quota bytes: too small for $largest objects of each kind" >&2
  exit 1
fi
avail=$(awk '$1 == "MemAvailable:" {print $2}' /proc/meminfo)
if [ "$avail" -lt $((largest * nkinds * 4)) ]; then
  echo "bench: $avail KiB available; the API server's watch cache needs about $((largest * nkinds * 4)) KiB" >&2
  exit 1
fi
node=$(kc get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.kwok\.x-k8s\.io/node}{"\n"}{end}' |
  awk '$2 == "fake" {print $1; exit}')
[ -n "$node" ] || { echo "bench: no kwok node to bind Pods to" >&2; exit 1; }

start() { # IMPL KIND LOG: the controller, in the background, its pid in $pid
  local what
  what=$([ "$2" = Pod ] && echo pods || echo configmaps)
  if [ "$1" = luaop ]; then
    "$bin" --kubeconfig "$KUBECONFIG" --metrics-bind-address "127.0.0.1:$port" --script "bench/$what.lua" 2>"$3" &
  else
    "$peer" --kubeconfig "$KUBECONFIG" --metrics-bind-address "127.0.0.1:$port" --operators "$what" \
      --strip-managed-fields 2>"$3" &
  fi
  pid=$!
}
stop() { kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
synced() { grep -q "caches synced" "$1"; }
order() { if (($1 % 2)); then echo luaop peer; else echo peer luaop; fi; }

scale_cleanup() {
  hack/cluster.sh resume-controllers >/dev/null 2>&1 || echo "bench: could not start the controllers again" >&2
  bench_cleanup
}
trap scale_cleanup EXIT

for kind in $kinds; do
  kns=$ns-$(echo "$kind" | tr 'A-Z' 'a-z')
  kc create namespace "$kns" >/dev/null
  hack/cluster.sh pause-controllers 2>/dev/null
  have=0
  for n in $sizes; do
    if [ "$n" -gt "$have" ]; then
      t0=$SECONDS
      "$bin" --kubeconfig "$KUBECONFIG" --program bench/scale.lua -- create "$kind" "$kns" $((have + 1)) "$n" "$node" \
        >/dev/null || { echo "bench: creating $kind objects failed" >&2; exit 1; }
      echo "bench: $n ${kind}s in place ($((SECONDS - t0)) s)" >&2
      have=$n
      if [ "$kind" = Pod ]; then # (until each runs: a status write left would load the API server)
        t0=$SECONDS
        "$bin" --kubeconfig "$KUBECONFIG" --program bench/scale.lua -- settle Pod "$kns" >/dev/null ||
          { echo "bench: Pods still Pending after an hour" >&2; exit 1; }
        echo "bench: every Pod running ($((SECONDS - t0)) s)" >&2
      fi
    fi
    for r in $(seq 1 "$rounds"); do
      r0=$SECONDS
      for impl in $(order "$r"); do
        start "$impl" "$kind" "$tmp/run.log"
        t0=$(now)
        WAIT_SECONDS=600 wait_until "$impl caches synced" synced "$tmp/run.log"
        record "$impl" "$kind" synced_s "$n" "$(echo "$(now) - $t0" | bc -l)"
        WAIT_SECONDS=900 wait_until "$impl to reconcile $n ${kind}s" reconciled "$n"
        sleep "$settle"
        record "$impl" "$kind" rss_kib "$n" "$(rss "$pid" VmRSS)"
        record "$impl" "$kind" hwm_kib "$n" "$(rss "$pid" VmHWM)"
        buckets >"$tmp/b0"
        c0=$(cpu "$pid")
        "$bin" --kubeconfig "$KUBECONFIG" --program bench/scale.lua -- churn "$kind" "$kns" "$n" "$rate" "$churn" \
          "$impl-$r-$n" >"$tmp/churn"
        # until the last change was reconciled: its event is in within a
        # second of its answer, then nothing queued
        sleep 1
        WAIT_SECONDS=300 wait_until "$impl to reconcile the changes" reconciled 0
        changes=$(awk '$1 == "changes" {print $2}' "$tmp/churn")
        record "$impl" "$kind" rate "$n" "$(awk '$1 == "rate" {print $2}' "$tmp/churn")"
        record "$impl" "$kind" cpu_us "$n" "$(awk -v a="$(cpu "$pid")" -v b="$c0" -v n="$changes" \
          'BEGIN {printf "%.1f", (a - b) * 1e6 / n}')"
        buckets >"$tmp/b1"
        record "$impl" "$kind" p50_ms "$n" "$(pct "$tmp/b0" "$tmp/b1" 50)"
        record "$impl" "$kind" p99_ms "$n" "$(pct "$tmp/b0" "$tmp/b1" 99)"
        stop
      done
      [ "$r" -eq 1 ] || extra=$((extra + SECONDS - r0))
    done
  done
  # (its objects first, 100 deletes at once: the namespace controller
  # deletes them one at a time, 10 minutes for 300k ConfigMaps)
  t0=$SECONDS
  "$bin" --kubeconfig "$KUBECONFIG" --program bench/scale.lua -- delete "$kind" "$kns" "$have" >/dev/null ||
    echo "bench: deleting $kind objects failed" >&2
  hack/cluster.sh resume-controllers 2>/dev/null
  kc delete namespace "$kns" --timeout=1800s >/dev/null
  echo "bench: ${kind}s deleted ($((SECONDS - t0)) s)" >&2
  hack/cluster.sh compact >/dev/null 2>&1 || true
done

# ---- the table
value() { # IMPL KIND MEASURE N [min|max]: the median (or min, max) of the rounds
  awk -F'\t' -v i="$1" -v k="$2" -v m="$3" -v n="$4" '$1 == i && $2 == k && $3 == m && $4 == n {print $5}' \
    "$results" | sort -g | awk -v w="${5:-median}" '{a[NR] = $1}
      END {if (!NR) print "nan"; else if (w == "min") print a[1]; else if (w == "max") print a[NR];
           else print a[int((NR + 1) / 2)]}'
}
cell() { if [ "$rounds" -gt 1 ]; then echo "$(value "$@") ($(value "$@" min)-$(value "$@" max))"; else value "$@"; fi; }
{
  echo "luaop $("$bin" --version | head -1 | awk '{print $2}') against the controller-runtime $(awk \
    '$1 == "sigs.k8s.io/controller-runtime" {print $2}' bench/peer/go.mod) peer (managedFields stripped), $rounds round(s)"
  echo "$(date -u +%Y-%m-%d), $(nproc) cores, Kubernetes $(kc get --raw /version | awk -F'"' '/gitVersion/ {print $4}'),\
 churn $rate changes/s for $churn s"
  printf '%-10s %8s %-6s %14s %12s %12s %14s %10s %10s %10s\n' kind objects impl "synced s" "VmRSS KiB" \
    "VmHWM KiB" "changes/s" "CPU/ev us" "p50 ms" "p99 ms"
  for kind in $kinds; do
    for n in $sizes; do
      for impl in luaop peer; do
        printf '%-10s %8s %-6s %14s %12s %12s %14s %10s %10s %10s\n' "$kind" "$n" "$impl" \
          "$(cell "$impl" "$kind" synced_s "$n")" "$(cell "$impl" "$kind" rss_kib "$n")" \
          "$(cell "$impl" "$kind" hwm_kib "$n")" "$(cell "$impl" "$kind" rate "$n")" \
          "$(cell "$impl" "$kind" cpu_us "$n")" "$(cell "$impl" "$kind" p50_ms "$n")" \
          "$(cell "$impl" "$kind" p99_ms "$n")"
      done
    done
  done
  total=$((SECONDS - started))
  if [ "$rounds" -gt 1 ]; then
    echo "run time: $total s, of which rounds 2 to $rounds took $extra s"
  else
    echo "run time: $total s"
  fi
  printf 'goal: %-56s %8s %s %-6s %s\n' "run time of one round (ROUNDS=1), s" $((total - extra)) "<=" 3600 \
    "$( [ $((total - extra)) -le 3600 ] && echo met || echo "not met")"
} | tee "$out/table.txt"

# ---- charts: log-log, one per kind and measure
if command -v gnuplot >/dev/null; then
  for kind in $kinds; do
    for m in synced_s rss_kib cpu_us p99_ms; do
      for n in $sizes; do echo "$n $(value luaop "$kind" "$m" "$n") $(value peer "$kind" "$m" "$n")"; done \
        >"$out/$kind-$m.dat"
      gnuplot <<EOF
set terminal svg size 640,400 dynamic font "sans,12"
set key top left
set grid
set logscale xy
set output "$out/scale-$kind-$m.svg"
set title "$kind: $m against the objects cached"
set xlabel "${kind}s cached"
set ylabel "$m"
plot "$out/$kind-$m.dat" using 1:3 with linespoints lw 2 title "controller-runtime (managedFields stripped)", \
     "$out/$kind-$m.dat" using 1:2 with linespoints lw 2 title "luaop"
EOF
    done
  done
  echo "charts: $out/scale-*.svg"
else
  echo "bench: gnuplot is missing (hack/deps.sh bench): no charts" >&2
fi

#!/usr/bin/env bash
# bench/compare.sh [ROUNDS] - luaop against a controller-runtime build of the
# same four operators (bench/peer, built by bench/peer.sh), side by side on
# the local control plane (make cluster-up), taking turns, in one run.
#
# For each measure, ROUNDS rounds (default 3); in each round both run, one
# after the other, the one that goes first alternating. Every process is
# started the same way: --kubeconfig, --metrics-bind-address (both serve
# controller-runtime's metric names, which this script reads), no client-side
# rate limit (the default of both).
#
#   size      the stripped binaries
#   idle      the four operators (luaop --script operators/, the peer's
#             default): VmRSS SETTLE s after "caches synced"
#   objects   for each N of OBJECTS (default "1000 10000 100000"; N more
#             ConfigMaps of about 1 KiB of compact JSON are created in a
#             namespace of their own between steps): a controller on every
#             ConfigMap with a reconcile that does nothing (bench/configmaps.lua,
#             the peer's "configmaps"), from launch to "caches synced", then
#             until every ConfigMap was reconciled, then SETTLE s: the time to
#             synced, VmRSS, VmHWM (the peak); the growth of VmRSS over the
#             same with no ConfigMaps of the namespace, per object, against
#             the object's compact JSON as the cache keeps it; then the
#             same on a metadata-only cache (bench/configmaps-meta.lua, the
#             peer's "configmaps-meta": builder.OnlyMetadata); the
#             controller manager, scheduler and kwok stopped meanwhile
#             (hack/cluster.sh pause-controllers), so that the API server
#             serves these alone
#   converge  for each M of MACHINES (default "250 500 1000"): the useless
#             machine alone, WORKERS workers for both (default: the
#             concurrency operators/useless-machine.lua ships with); M Machines
#             of 3 switches created at once (64 creates in flight) in a fresh
#             namespace; the time from the first create until a watch has
#             seen every Machine read "ddd"; the writes the API server counted
#             meanwhile (its apiserver_request_total, by resource and code:
#             Switch creates, Machine and Switch updates, deletes, 409
#             Conflicts), the operator's reconciles, its work queue's wait and
#             work time and its CPU time (its own /metrics and /proc); the end
#             state checked the same for both (bench/compare.lua state); then
#             the same writes made directly with nothing running (M Machine
#             creates, 3M Switch creates, M status writes, 64 in flight)
#             right after them in the same round; each implementation's
#             time over that round's raw time is its ratio for the round
#             (the raw time follows the API server's pace that minute), and
#             the goal takes the median of luaop's rounds
#
# The peer runs twice in each round: as kubebuilder scaffolds it ("peer":
# controller-runtime's defaults, managedFields cached) and at its best
# ("peer -mf": --strip-managed-fields, cache.TransformStripManagedFields() as
# the DefaultTransform, as luaop's caches always drop them). The ratio is
# luaop's over the better of the two.
#
# Prints each measure's median for each and the ratio, writes every value
# to $OUT/results.tsv (default build/bench/compare) and draws
# $OUT/memory.svg and $OUT/converge.svg with gnuplot (hack/deps.sh bench).
rounds=${1:-3}
objects=${OBJECTS-"1000 10000 100000"}
machines=${MACHINES-"250 500 1000"}
# the useless machine's shipped concurrency, for both, unless WORKERS says
workers=${WORKERS:-$(sed -n 's/^  concurrency = \([0-9]*\),.*/\1/p' "$(dirname "$0")/../operators/useless-machine.lua")}
settle=${SETTLE:-5}
. "$(dirname "$0")/lib.sh" compare
out=${OUT:-build/bench/compare}
mkdir -p "$out"
results=$out/results.tsv
: >"$results"
peer=$(bench/peer.sh) || { echo "bench: could not build the peer (bench/peer.sh)" >&2; exit 1; }
port=${METRICS_PORT:-18491}
prog() { "$bin" --kubeconfig "$KUBECONFIG" --program "$@"; }

# record IMPL MEASURE PARAM VALUE
record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$results"; }

# start IMPL WHAT LOG: the implementation IMPL (luaop or peer) running WHAT
# (four, configmaps or machine) in the background, its pid in $pid
start() {
  local impl=$1 what=$2 log=$3 args=()
  if [ "$impl" = luaop ]; then
    case $what in
      four) args=(--script operators/) ;;
      configmaps) args=(--script bench/configmaps.lua) ;;
      configmaps-meta) args=(--script bench/configmaps-meta.lua) ;;
      machine)
        sed "s/^  concurrency = [0-9]*,/  concurrency = $workers,/" operators/useless-machine.lua >"$tmp/useless-machine.lua"
        grep -q "^  concurrency = $workers," "$tmp/useless-machine.lua" || { echo "bench: no concurrency line" >&2; exit 1; }
        args=(--script "$tmp/useless-machine.lua") ;;
    esac
    "$bin" --kubeconfig "$KUBECONFIG" --metrics-bind-address "127.0.0.1:$port" "${args[@]}" 2>"$log" &
  else
    case $what in
      four) args=() ;;
      configmaps) args=(--operators configmaps) ;;
      configmaps-meta) args=(--operators configmaps-meta) ;;
      machine) args=(--operators machine --workers "$workers") ;;
    esac
    [ "$impl" = peer-mf ] && args+=(--strip-managed-fields)
    "$peer" --kubeconfig "$KUBECONFIG" --metrics-bind-address "127.0.0.1:$port" "${args[@]}" 2>"$log" &
  fi
  pid=$!
}
stop() { kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
synced() { grep -q "caches synced" "$1"; }
# the implementations of round R, the one going first rotating
impls=(luaop peer peer-mf)
order() { local i; for i in 0 1 2; do echo "${impls[$((($1 + i) % 3))]}"; done; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "nan"}'; }
# value IMPL MEASURE PARAM: the median of the rounds
value() { awk -F'\t' -v i="$1" -v m="$2" -v p="$3" '$1 == i && $2 == m && $3 == p {print $4}' "$results" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 == 0) print "-"; else printf "%.2f\n", a / b}'; }
# the better (lower) of two values; nan when neither is a number
best() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan") print b; else if (b == "nan") print a; else print (a + 0 <= b + 0 ? a : b)}'; }

# ---- size
strip -o "$tmp/luaop.stripped" "$bin"
record luaop size_bytes - "$(stat -c %s "$tmp/luaop.stripped")"
record peer size_bytes - "$(stat -c %s "$peer")"
record peer-mf size_bytes - "$(stat -c %s "$peer")"

# ---- idle: the four operators
kc apply -k manifests/crds >/dev/null
kc wait --for condition=Established crd --all --timeout=60s >/dev/null
for r in $(seq 1 "$rounds"); do
  for impl in $(order "$r"); do
    start "$impl" four "$tmp/idle.log"
    t0=$(now)
    wait_until "$impl caches synced" synced "$tmp/idle.log"
    record "$impl" idle_synced_s - "$(echo "$(now) - $t0" | bc -l)"
    sleep "$settle" # idle: what it holds once nothing happens
    record "$impl" idle_rss_kib - "$(rss "$pid" VmRSS)"
    stop
  done
done

# ---- objects: N cached ConfigMaps
objns=$ns-objects
kc create namespace "$objns" >/dev/null
cleanup_objects() { kc delete namespace "$objns" --timeout=300s >/dev/null 2>&1 || true; }
resume() { hack/cluster.sh resume-controllers 2>/dev/null || echo "bench: could not start the controllers again" >&2; }
trap 'resume; cleanup_objects; bench_cleanup' EXIT
# (the API server serves these alone: the controller manager, scheduler and
# kwok stopped, as in bench/scale.sh; started again for the namespaces'
# deletes and the converge)
[ -z "$objects" ] || hack/cluster.sh pause-controllers 2>/dev/null
have=0
for n in 0 $objects; do
  if [ "$n" -gt "$have" ]; then
    prog bench/cache.lua -- create "$objns" "$n" $((have + 1)) >/dev/null
    have=$n
  fi
  for r in $(seq 1 "$rounds"); do
    for impl in $(order "$r"); do
      start "$impl" configmaps "$tmp/objects.log"
      t0=$(now)
      WAIT_SECONDS=300 wait_until "$impl caches synced" synced "$tmp/objects.log"
      record "$impl" synced_s "$n" "$(echo "$(now) - $t0" | bc -l)"
      WAIT_SECONDS=300 wait_until "$impl to reconcile $n ConfigMaps" reconciled "$n"
      sleep "$settle"
      record "$impl" rss_kib "$n" "$(rss "$pid" VmRSS)"
      record "$impl" hwm_kib "$n" "$(rss "$pid" VmHWM)"
      stop
      start "$impl" configmaps-meta "$tmp/objects.log"
      WAIT_SECONDS=300 wait_until "$impl caches synced" synced "$tmp/objects.log"
      WAIT_SECONDS=300 wait_until "$impl to reconcile $n ConfigMaps" reconciled "$n"
      sleep "$settle"
      record "$impl" meta_rss_kib "$n" "$(rss "$pid" VmRSS)"
      stop
    done
  done
done
json=$(prog bench/compare.lua -- jsonsize "$objns" | awk '{print $2}')
record - json_bytes - "$json"
[ -z "$objects" ] || resume
cleanup_objects

# ---- converge
# the API server's write count for the useless machine's group, by
# resource/subresource, verb and code (a DELETE of a collection, scope
# "namespace", apart as DELETECOLLECTION: the namespaces' deletes count
# one each there, and two series under one key made their difference
# look like writes)
writes() {
  kc get --raw /metrics | awk '/^apiserver_request_total\{/ && /group="useless.container.training"/ {
    match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11)
    match($0, /subresource="[^"]*"/); s = substr($0, RSTART + 13, RLENGTH - 14)
    match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
    match($0, /code="[^"]*"/); c = substr($0, RSTART + 6, RLENGTH - 7)
    match($0, /scope="[^"]*"/); sc = substr($0, RSTART + 7, RLENGTH - 8)
    if (v == "DELETE" && sc != "resource") v = "DELETECOLLECTION"
    if (v == "POST" || v == "PUT" || v == "PATCH" || v ~ /^DELETE/) n[r (s != "" ? "/" s : "") " " v " " c] += $NF
  } END {for (k in n) print k, n[k]}' | sort
}
# gone NS: the namespace's Switches and Machines deleted, each kind in one
# request (a deletecollection), then the namespace, and waited for until
# none is left: deleting the namespace alone leaves its Machines'
# Switches to the garbage collector, one DELETE each, for a minute after
# the namespace is gone, and they fell in the next measure's count
gone() {
  local g=/apis/useless.container.training/v1alpha1/namespaces/$1
  kc delete --raw "$g/switches" >/dev/null
  kc delete --raw "$g/machines" >/dev/null
  kc delete namespace "$1" --timeout=600s >/dev/null
  left() { [ -z "$(kc get switches,machines -n "$1" -o name 2>/dev/null)" ]; }
  WAIT_SECONDS=600 wait_until "namespace $1's Switches and Machines to be gone" left "$1"
}
# delta BEFORE AFTER: the writes between the two counts
delta() { awk 'FILENAME == ARGV[1] {b[$1 " " $2 " " $3] = $4; next} {d = $4 - b[$1 " " $2 " " $3]; if (d > 0) print $1, $2, $3, d}' "$1" "$2"; }
for m in $machines; do
  for r in $(seq 1 "$rounds"); do
    for impl in $(order "$r"); do
      cns=$ns-$impl-$m-$r
      kc create namespace "$cns" >/dev/null
      start "$impl" machine "$tmp/converge.log"
      wait_until "$impl caches synced" synced "$tmp/converge.log"
      prog bench/converge.lua -- watch "$cns" "$m" >"$tmp/watch" &
      watcher=$!
      wait_until "the watcher" grep -q ready "$tmp/watch"
      writes >"$tmp/before"
      cpu0=$(cpu "$pid")
      prog bench/converge.lua -- machines "$cns" "$m" >"$tmp/create"
      WAIT_SECONDS=600 wait_until "$m Machines ddd" grep -q '^end' "$tmp/watch"
      wait "$watcher"
      start_t=$(awk '$1 == "start" {print $2}' "$tmp/create")
      end_t=$(awk '$1 == "end" {print $2}' "$tmp/watch")
      record "$impl" converge_s "$m" "$(echo "$end_t - $start_t" | bc -l)"
      record "$impl" converge_cpu_s "$m" "$(echo "$(cpu "$pid") - $cpu0" | bc -l)"
      writes >"$tmp/after"
      delta "$tmp/before" "$tmp/after" >"$tmp/delta"
      # the operator's writes: all but the benchmark's own Machine creates
      ops=$(awk '!($1 == "machines" && $2 == "POST") {s += $4} END {print s + 0}' "$tmp/delta")
      record "$impl" writes "$m" "$ops"
      [ "$ops" -eq $((4 * m)) ] || echo "bench: $impl: $ops writes, not $((4 * m)) ($(awk \
        '!($1 == "machines" && $2 == "POST") {printf "%s%s %s %s: %d", n++ ? "; " : "", $1, $2, $3, $4}' "$tmp/delta"))" >&2
      record "$impl" switch_creates "$m" "$(awk '$1 == "switches" && $2 == "POST" && $3 == "201" {s += $4} END {print s + 0}' "$tmp/delta")"
      record "$impl" status_writes "$m" "$(awk '$1 == "machines/status" && $3 == "200" {s += $4} END {print s + 0}' "$tmp/delta")"
      record "$impl" conflicts "$m" "$(awk '$3 == "409" {s += $4} END {print s + 0}' "$tmp/delta")"
      record "$impl" reconciles "$m" "$(msum controller_runtime_reconcile_total)"
      record "$impl" queue_wait_s "$m" "$(msum workqueue_queue_duration_seconds_sum)"
      record "$impl" work_s "$m" "$(msum workqueue_work_duration_seconds_sum)"
      state=$(prog bench/compare.lua -- state "$cns" "$m")
      # luaop must; the peer, written as a kubebuilder user writes it, has
      # no expectations (its cache may not have its own creates yet when it
      # reconciles again, so it may create a Switch twice): said and counted
      if [ "$state" != ok ]; then
        echo "bench: $impl did not reach the end state with $m Machines: ${state:0:300}" >&2
        [ "$impl" = luaop ] && exit 1
      fi
      record "$impl" end_state "$m" "$([ "$state" = ok ] && echo 1 || echo 0)"
      stop
      gone "$cns"
    done
    cns=$ns-raw-$m-$r
    kc create namespace "$cns" >/dev/null
    raw_s=$(prog bench/compare.lua -- raw "$cns" "$m" | awk '$1 == "seconds" {print $2}')
    record raw converge_s "$m" "$raw_s"
    for impl in luaop peer peer-mf; do # (this round's time over this round's raw time)
      record "$impl" converge_over_raw "$m" "$(ratio "$(awk -F'\t' -v i="$impl" -v m="$m" \
        '$1 == i && $2 == "converge_s" && $3 == m {v = $4} END {print v}' "$results")" "$raw_s")"
    done
    gone "$cns"
  done
done

# ---- the table
# a number as the table shows it: whole above 100, else 3 decimals
fmt() { awk -v v="$1" 'BEGIN {if (v == "nan" || v == "-") print v; else if (v + 0 >= 100 || v + 0 <= -100) printf "%.0f\n", v; else printf "%.3f\n", v}'; }
# spread IMPL MEASURE PARAM: "min-max" of the rounds, as fmt shows them
spread() {
  local lo hi
  lo=$(awk -F'\t' -v i="$1" -v m="$2" -v p="$3" '$1 == i && $2 == m && $3 == p {print $4}' "$results" | sort -g | head -1)
  hi=$(awk -F'\t' -v i="$1" -v m="$2" -v p="$3" '$1 == i && $2 == m && $3 == p {print $4}' "$results" | sort -g | tail -1)
  [ -n "$lo" ] && echo "$(fmt "$lo")-$(fmt "$hi")"
}
line() { printf '%-44s %11s %11s %11s %6s  %s\n' "$@"; }
# row LABEL MEASURE PARAM: the medians, the ratio to the better peer, and
# the rounds' spread of luaop and of the better peer
row() {
  local l p m b who
  l=$(value luaop "$2" "$3")
  p=$(value peer "$2" "$3")
  m=$(value peer-mf "$2" "$3")
  b=$(best "$p" "$m")
  who=peer-mf
  [ "$b" = "$p" ] && who=peer
  line "$1" "$(fmt "$l")" "$(fmt "$p")" "$(fmt "$m")" "$(ratio "$l" "$b")" "$(spread luaop "$2" "$3") / $(spread "$who" "$2" "$3")"
}
# goal NAME VALUE OP LIMIT: a goal's line, met or not met
goal() {
  local ok
  ok=$(awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN {if (v == "nan" || v == "-" || v == "") print "not measured"; else if ((op == "<=" && v + 0 <= l + 0) || (op == "<" && v + 0 < l + 0)) print "met"; else print "not met"}')
  printf 'goal: %-56s %8s %s %-6s %s\n' "$1" "$2" "$3" "$4" "$ok"
}
per_object() { # IMPL N [MEASURE]: VmRSS growth per object, B
  awk -v a="$(value "$1" "${3:-rss_kib}" "$2")" -v b="$(value "$1" "${3:-rss_kib}" 0)" -v n="$2" \
    'BEGIN {printf "%.0f", (a - b) * 1024 / n}'
}
{
  echo "luaop $("$bin" --version | head -1 | awk '{print $2}') against the controller-runtime $(awk '$1 == "sigs.k8s.io/controller-runtime" {print $2}' bench/peer/go.mod) peer (peer: its defaults; peer-mf: managedFields stripped), medians of $rounds rounds"
  echo "$(date -u +%Y-%m-%d), $(nproc) cores, Kubernetes $(kc get --raw /version | awk -F'"' '/gitVersion/ {print $4}'), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  line measure luaop peer peer-mf ratio "min-max: luaop / the better peer"
  row "stripped binary, bytes" size_bytes -
  row "idle, four operators: VmRSS KiB" idle_rss_kib -
  row "idle, four operators: launch to synced, s" idle_synced_s -
  for n in 0 $objects; do
    row "$n ConfigMaps: launch to synced, s" synced_s "$n"
    row "$n ConfigMaps: VmRSS KiB" rss_kib "$n"
    row "$n ConfigMaps: VmHWM KiB" hwm_kib "$n"
  done
  for n in $objects; do
    l=$(per_object luaop "$n"); p=$(per_object peer "$n"); m=$(per_object peer-mf "$n")
    line "$n ConfigMaps: VmRSS growth per object, B" "$l" "$p" "$m" "$(ratio "$l" "$(best "$p" "$m")")"
    line "  over the compact JSON ($(fmt "$json") B)" "$(ratio "$l" "$json")" "$(ratio "$p" "$json")" "$(ratio "$m" "$json")" ""
    record luaop per_object_b "$n" "$l"
    record peer per_object_b "$n" "$p"
    record peer-mf per_object_b "$n" "$m"
  done
  for n in 0 $objects; do
    row "$n ConfigMaps, metadata only: VmRSS KiB" meta_rss_kib "$n"
  done
  for n in $objects; do
    l=$(per_object luaop "$n" meta_rss_kib); p=$(per_object peer "$n" meta_rss_kib); m=$(per_object peer-mf "$n" meta_rss_kib)
    line "$n ConfigMaps, metadata only: per object, B" "$l" "$p" "$m" "$(ratio "$l" "$(best "$p" "$m")")"
    record luaop meta_per_object_b "$n" "$l"
    record peer meta_per_object_b "$n" "$p"
    record peer-mf meta_per_object_b "$n" "$m"
  done
  for m in $machines; do
    row "$m Machines: converge, s ($workers workers)" converge_s "$m"
    line "  over the same writes, raw ($(fmt "$(value raw converge_s "$m")") s)" \
      "$(value luaop converge_over_raw "$m")" "$(value peer converge_over_raw "$m")" \
      "$(value peer-mf converge_over_raw "$m")" "" "raw $(spread raw converge_s "$m"); luaop $(spread luaop converge_over_raw "$m")"
    row "  writes (necessary: $((4 * m)))" writes "$m"
    row "  switch creates" switch_creates "$m"
    row "  Machine status writes" status_writes "$m"
    row "  409 Conflicts" conflicts "$m"
    row "  end state exact (1: yes)" end_state "$m"
    row "  reconciles" reconciles "$m"
    row "  work queue wait, s (sum)" queue_wait_s "$m"
    row "  reconcile time, s (sum)" work_s "$m"
    row "  CPU, s" converge_cpu_s "$m"
  done
  # the goals of issue 35, in this run
  ratio_best() { ratio "$(value luaop "$1" "$2")" "$(best "$(value peer "$1" "$2")" "$(value peer-mf "$1" "$2")")"; }
  for n in 10000 100000; do
    case " $objects " in *" $n "*)
      goal "$n ConfigMaps: per object over the compact JSON" "$(ratio "$(per_object luaop "$n")" "$json")" "<=" 1.5
      goal "$n ConfigMaps: per object over the compact JSON (must)" "$(ratio "$(per_object luaop "$n")" "$json")" "<=" 1.8
      goal "$n ConfigMaps: per object, over the better peer" "$(ratio "$(per_object luaop "$n")" "$(best "$(per_object peer "$n")" "$(per_object peer-mf "$n")")")" "<" 1
      goal "$n ConfigMaps: launch to synced, over the better peer" "$(ratio_best synced_s "$n")" "<" 1
      # (issue 35 sets this one at 100k; at 10k the store's fixed costs
      # weigh more, and the row above shows it)
      [ "$n" = 100000 ] && goal "$n ConfigMaps, metadata only: per object, B" "$(per_object luaop "$n" meta_rss_kib)" "<=" 512
      goal "$n ConfigMaps, metadata only: per object, over the better peer" \
        "$(ratio "$(per_object luaop "$n" meta_rss_kib)" "$(best "$(per_object peer "$n" meta_rss_kib)" \
        "$(per_object peer-mf "$n" meta_rss_kib)")")" "<" 1 ;;
    esac
  done
  goal "idle VmRSS, over the better peer" "$(ratio_best idle_rss_kib -)" "<" 1
  for m in $machines; do
    goal "$m Machines: converge over the same writes raw (in each round)" "$(value luaop converge_over_raw "$m")" "<=" 1.2
    goal "$m Machines: converge, over the better peer" "$(ratio_best converge_s "$m")" "<" 1
  done
} | tee "$out/table.txt"

# ---- charts
if command -v gnuplot >/dev/null; then
  for n in $objects; do
    printf '%s %s %s %s\n' "$n" "$(awk -v a="$(value luaop rss_kib "$n")" -v b="$(value luaop rss_kib 0)" 'BEGIN {print (a - b) / 1024}')" \
      "$(awk -v a="$(value peer rss_kib "$n")" -v b="$(value peer rss_kib 0)" 'BEGIN {print (a - b) / 1024}')" \
      "$(awk -v a="$(value peer-mf rss_kib "$n")" -v b="$(value peer-mf rss_kib 0)" 'BEGIN {print (a - b) / 1024}')"
  done >"$out/memory.dat"
  for m in ${machines:-none}; do
    [ "$m" = none ] && break
    printf '%s %s %s %s %s\n' "$m" "$(value luaop converge_s "$m")" "$(value peer converge_s "$m")" "$(value raw converge_s "$m")" \
      "$(value peer-mf converge_s "$m")"
  done >"$out/converge.dat"
  # (a chart only of what this run measured: gnuplot fails on no points)
  charts=""
  head='set terminal svg size 640,400 dynamic font "sans,12"
set key top left
set grid'
  [ -z "$objects" ] || { charts+=" $out/memory.svg"; gnuplot <<EOF
$head
set output "$out/memory.svg"
set title "VmRSS growth with cached ConfigMaps (about ${json} B of JSON each)"
set xlabel "cached ConfigMaps"
set ylabel "MiB over no ConfigMaps"
set logscale xy
plot "$out/memory.dat" using 1:3 with linespoints lw 2 title "controller-runtime", \
     "$out/memory.dat" using 1:4 with linespoints lw 2 title "controller-runtime, managedFields stripped", \
     "$out/memory.dat" using 1:2 with linespoints lw 2 title "luaop", \
     "$out/memory.dat" using 1:(\$1 * ${json} / 1048576) with lines dt 2 title "their compact JSON"
EOF
  }
  [ -z "$machines" ] || { charts+=" $out/converge.svg"; gnuplot <<EOF
$head
set output "$out/converge.svg"
set title "Useless machine converging, $workers workers"
set xlabel "Machines (3 Switches each)"
set ylabel "seconds to all ddd"
set yrange [0:*]
plot "$out/converge.dat" using 1:3 with linespoints lw 2 title "controller-runtime", \
     "$out/converge.dat" using 1:5 with linespoints lw 2 title "controller-runtime, managedFields stripped", \
     "$out/converge.dat" using 1:2 with linespoints lw 2 title "luaop", \
     "$out/converge.dat" using 1:4 with linespoints lw 2 dt 2 title "the same writes, raw"
EOF
  }
  echo "charts:$charts"
else
  echo "bench: gnuplot is missing (hack/deps.sh bench): no charts" >&2
fi

#!/usr/bin/env bash
# bench/webhook.sh [ROUNDS] - admission latency and memory of luaop's
# validating webhook for At (operators/webhooks/at-webhooks.lua) against a
# controller-runtime webhook of the same logic (bench/peer, --operators
# at-webhook, built by bench/peer.sh), taking turns on the local control
# plane (make cluster-up), in one run.
#
# Both serve the same serving certificate (hack/certs.sh: a CA and a pair
# for 127.0.0.1) on 127.0.0.1:PORT (default 19443), as a local process:
# luaop --script SCRIPT --webhook-bind-address 127.0.0.1:PORT
# --webhook-cert-path DIR; the peer with the same flags. Each, in its turn,
# is registered by a ValidatingWebhookConfiguration of its own (webhook
# validate-at.IMPL.bench, clientConfig.url
# https://127.0.0.1:PORT/validate-cnat-programming-kubernetes-info-v1alpha1-at
# and the caBundle, failurePolicy Fail, sideEffects None, limited by its
# namespaceSelector to this benchmark's namespace), in effect once a
# dry-run create of an invalid At is refused by it, and removed after its
# turn (until an invalid At is admitted again).
#
# The load (bench/webhook.lua load, on luaop's client): server-side dry-run
# creates of At objects (admission runs, nothing is written to etcd), paced
# open loop at a rate for SECONDS each (default 30); every EVERY-th one
# (default 10: a tenth) is refused by the webhook, the others are valid;
# an unexpected answer counts as an error.
#
#   100/s        RATE (default 100)
#   max          the highest rate this machine's API server sustains, found
#                first by stepping up through STEPS (default "150 200 250 300
#                400 500 600 800 1000 1200 1600"), STEP_SECONDS each
#                (default SECONDS: a shorter step passes rates a run of
#                SECONDS then falls behind at), with each implementation:
#                the last target reached
#                (answers a second at least 95% of it, no error, the 99th
#                percentile request sent at most 50 ms behind its time);
#                the lower of the two is used for both (MAX sets it and
#                skips the search)
#
# For each run: p50 and p99 of the admission latency (a) from the API
# server's own histogram apiserver_admission_webhook_admission_duration_seconds
# (its /metrics scraped before and after the run, the buckets of the
# webhook's name subtracted; interpolated within a bucket as Prometheus'
# histogram_quantile does: its buckets are 5, 25, 100, 500 ms..., so a
# value under 5 ms reads as a share of that first bucket) and (b) from the
# client (send to answer of each dry-run create: the API server's whole
# request, the webhook call within it); the rate achieved; the webhook
# process's VmRSS idle (SETTLE s, default 5, after it serves) and under load
# (the highest of samples every 0.2 s during the run) and its CPU time.
# In each round both run, the one going first alternating, then the same
# load with no webhook registered (every At valid): the client's figures of
# the API server alone, in the last column.
#
# Prints each round's rows with luaop's ratio to the peer (luaop / peer)
# measured in that round, then the medians of the rounds; every value goes
# to $OUT/results.tsv (default build/bench/webhook).
# IMPLS="peer" (or "luaop") runs one side alone.
rounds=${1:-3}
rate=${RATE:-100}
secs=${SECONDS_PER_RUN:-30}
every=${EVERY:-10}
steps=${STEPS:-"150 200 250 300 400 500 600 800 1000 1200 1600"}
step_secs=${STEP_SECONDS:-$secs}
settle=${SETTLE:-5}
impls=${IMPLS:-"luaop peer"}
script=${SCRIPT:-operators/webhooks/at-webhooks.lua}
port=${WEBHOOK_PORT:-19443}
path=/validate-cnat-programming-kubernetes-info-v1alpha1-at
. "$(dirname "$0")/lib.sh" webhook
out=${OUT:-build/bench/webhook}
mkdir -p "$out"
results=$out/results.tsv
: >"$results"
case " $impls " in *" peer "*) peer=$(nice -n 10 bench/peer.sh) || { echo "bench: could not build the peer (bench/peer.sh)" >&2; exit 1; } ;; esac
case " $impls " in *" luaop "*) [ -f "$script" ] || { echo "bench: no $script" >&2; exit 1; } ;; esac

certs=$tmp/certs
ca=$(hack/certs.sh --ca-bundle "$certs" 2>/dev/null) || { echo "bench: hack/certs.sh failed" >&2; exit 1; }
kc apply -k manifests/crds >/dev/null
kc wait --for condition=Established crd/ats.cnat.programming-kubernetes.info --timeout=60s >/dev/null
prog() { "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/webhook.lua -- "$@"; }

# record IMPL MEASURE PARAM VALUE ROUND (- for the search)
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$results"; }
rss() { awk '$1 == "VmRSS:" {print $2}' "/proc/$1/status"; } # KiB
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; } # s
get() { awk -v k="$2" '$1 == k {print $2}' "$1"; }

# the webhook configuration of IMPL, and its removal (at exit too)
config() {
  cat <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: $ns-$1}
webhooks:
- name: validate-at.$1.bench
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $ns}}
  rules:
  - {apiGroups: [cnat.programming-kubernetes.info], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [ats], scope: Namespaced}
  clientConfig: {url: "https://127.0.0.1:$port$path", caBundle: $ca}
EOF
}
unconfig() { kc delete validatingwebhookconfiguration "$ns-$1" --ignore-not-found >/dev/null; }
trap 'for i in luaop peer; do unconfig $i || true; done; bench_cleanup' EXIT

# start IMPL: its webhook serving, registered and in effect; pid in $pid
start() {
  local log=$tmp/$1.log
  if [ "$1" = luaop ]; then
    "$bin" --kubeconfig "$KUBECONFIG" --script "$script" --webhook-bind-address "127.0.0.1:$port" \
      --webhook-cert-path "$certs" 2>"$log" &
  else
    "$peer" --kubeconfig "$KUBECONFIG" --operators at-webhook --webhook-bind-address "127.0.0.1:$port" \
      --webhook-cert-path "$certs" 2>"$log" &
  fi
  pid=$!
  WAIT_SECONDS=30 wait_until "$1 serving on 127.0.0.1:$port" \
    curl -s -o /dev/null --cacert "$certs/ca.crt" "https://127.0.0.1:$port$path" || { cat "$log" >&2; exit 1; }
  config "$1" | kc apply -f - >/dev/null
  prog probe "$ns" refused || { cat "$log" >&2; exit 1; }
}
stop() {
  unconfig "$1"
  prog probe "$ns" admitted
  kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  pid=
}

# the API server's histogram of webhook NAME: "le count" lines, summed over
# its other labels (operation, rejected, type)
hist() {
  kc get --raw /metrics | awk -v n="name=\"$1\"" '
    index($0, "apiserver_admission_webhook_admission_duration_seconds_bucket{") == 1 && index($0, n) {
      match($0, /le="[^"]*"/); b[substr($0, RSTART + 4, RLENGTH - 5)] += $NF
    } END {for (le in b) print le, b[le]}' | sort -g
}
# quantile Q BEFORE AFTER: ms, from the difference of two scrapes, as
# histogram_quantile interpolates; "-" when no request was counted
quantile() {
  awk -v q="$1" 'FILENAME == ARGV[1] {b[$1] = $2; next} {le[++n] = $1; c[n] = $2 - b[$1]} END {
    total = c[n]; if (total <= 0) {print "-"; exit}
    rank = q * total; lo = 0; prev = 0
    for (i = 1; i <= n; i++) {
      if (c[i] >= rank) {
        if (le[i] ~ /Inf/) {printf "%.3f\n", lo * 1000; exit}
        printf "%.3f\n", (lo + (le[i] - lo) * (rank - prev) / (c[i] - prev)) * 1000; exit
      }
      lo = le[i]; prev = c[i]
    }}' "$2" "$3"
}
# under MS BEFORE AFTER: the share of calls in buckets up to MS, %
under() { awk -v le="$1" 'FILENAME == ARGV[1] {b[$1] = $2; next} {c[$1] = $2 - b[$1]} END {for (k in c) if (k !~ /Inf/ && k * 1000 == le) n = c[k]; for (k in c) if (k ~ /Inf/) t = c[k]; if (t > 0) printf "%.1f\n", 100 * n / t; else print "-"}' "$2" "$3"; }
count() { awk 'FILENAME == ARGV[1] {b[$1] = $2; next} $1 ~ /Inf/ {print $2 - b[$1]}' "$1" "$2"; }

# run IMPL LABEL RATE SECONDS: one load run against the webhook in $pid;
# the client's figures in $tmp/load, the histogram's in $tmp/h0, $tmp/h1,
# the process's CPU seconds in $cpu_used
run() {
  local sampler
  hist "validate-at.$1.bench" >"$tmp/h0"
  local c0
  c0=$(cpu "$pid")
  (while kill -0 "$pid" 2>/dev/null; do rss "$pid"; sleep 0.2; done) >"$tmp/rss" 2>/dev/null &
  sampler=$!
  prog load "$ns" "$3" "$4" "$every" >"$tmp/load"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  cpu_used=$(echo "$(cpu "$pid") - $c0" | bc -l)
  sleep 1 # the API server's last observations
  hist "validate-at.$1.bench" >"$tmp/h1"
}
# sustained RATE: the last run reached RATE
sustained() {
  awk -v r="$1" -v a="$(get "$tmp/load" rate)" -v e="$(get "$tmp/load" errors)" -v l="$(get "$tmp/load" late_p99_ms)" \
    'BEGIN {exit !(a >= 0.95 * r && e == 0 && l <= 50)}'
}

# ---- the highest rate sustained
if [ -n "${MAX:-}" ]; then
  max=$MAX
else
  max=
  for impl in $impls; do
    start "$impl"
    best=0
    for s in $steps; do
      run "$impl" "step-$s" "$s" "$step_secs"
      printf 'step %s: target %s/s, achieved %s/s, errors %s, p99 sent late %s ms, client p99 %s ms\n' "$impl" "$s" \
        "$(get "$tmp/load" rate)" "$(get "$tmp/load" errors)" "$(get "$tmp/load" late_p99_ms)" "$(get "$tmp/load" p99_ms)" >&2
      record "$impl" step_rate "$s" "$(get "$tmp/load" rate)" -
      sustained "$s" || break
      best=$s
    done
    record "$impl" max_sustained - "$best" -
    stop "$impl"
    if [ -z "$max" ] || [ "$best" -lt "$max" ]; then max=$best; fi
  done
  [ "$max" -gt 0 ] || { echo "bench: not even ${steps%% *}/s was sustained" >&2; exit 1; }
fi
echo "highest rate sustained (the lower of the two): $max/s" >&2

# ---- the runs
order() { if (($1 % 2)); then echo "$impls"; else echo "$impls" | awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "\n")}'; fi; }
fmt() { awk -v v="$1" 'BEGIN {if (v == "" || v == "-") print "-"; else if (v + 0 >= 100) printf "%.0f\n", v; else printf "%.3f\n", v}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b}'; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "-"}'; }
# value IMPL MEASURE PARAM [ROUND]: of ROUND, else the median of the rounds
value() { awk -F'\t' -v i="$1" -v m="$2" -v p="$3" -v r="${4:-}" '$1 == i && $2 == m && $3 == p && $5 != "-" && (r == "" || $5 == r) && $4 != "-" {print $4}' "$results" | median; }
measures="rate_achieved:rate achieved, /s
api_p50_ms:API server p50, ms
api_p99_ms:API server p99, ms
api_under5_pct:API server: calls under 5 ms, %
client_p50_ms:client p50, ms
client_p99_ms:client p99, ms
client_max_ms:client max, ms
rss_load_kib:VmRSS under load, KiB
cpu_s:CPU, s"
# table LABEL [ROUND]: the rows of ROUND (or the medians of all rounds)
row() { # LABEL MEASURE PARAM ROUND
  local l p n
  l=$(value luaop "$2" "$3" "$4")
  p=$(value peer "$2" "$3" "$4")
  n=$(value none "$2" "$3" "$4")
  printf '%-42s %10s %10s %7s %10s\n' "$1" "$(fmt "$l")" "$(fmt "$p")" "$(ratio "$l" "$p")" "$(fmt "$n")"
}
table() {
  local m r label
  printf '%-42s %10s %10s %7s %10s\n' "$1" luaop peer ratio "no webhook"
  row "VmRSS idle, KiB" rss_idle_kib - "${2:-}"
  for r in "$rate" "$max"; do
    while IFS=: read -r m label; do
      row "$r/s: $label" "$m" "$r" "${2:-}"
    done <<<"$measures"
  done
}
for r in $(seq 1 "$rounds"); do
  for impl in $(order "$r"); do
    start "$impl"
    sleep "$settle"
    record "$impl" rss_idle_kib - "$(rss "$pid")" "$r"
    for target in "$rate" "$max"; do
      run "$impl" "$target" "$target" "$secs"
      errors=$(get "$tmp/load" errors)
      [ "$errors" = 0 ] || echo "bench: $impl at $target/s: $errors unexpected answers ($(sed -n 's/^first_error //p' "$tmp/load"))" >&2
      sustained "$target" || echo "bench: $impl at $target/s fell behind: $(get "$tmp/load" rate) answers a second, the 99th percentile request sent $(get "$tmp/load" late_p99_ms) ms late" >&2
      n=$(count "$tmp/h0" "$tmp/h1")
      [ "${n:-0}" -gt 0 ] || { echo "bench: the API server counted no call of validate-at.$impl.bench" >&2; exit 1; }
      for kv in "rate_achieved $(get "$tmp/load" rate)" "api_p50_ms $(quantile 0.50 "$tmp/h0" "$tmp/h1")" \
        "api_p99_ms $(quantile 0.99 "$tmp/h0" "$tmp/h1")" "api_under5_pct $(under 5 "$tmp/h0" "$tmp/h1")" "client_p50_ms $(get "$tmp/load" p50_ms)" \
        "client_p99_ms $(get "$tmp/load" p99_ms)" "client_max_ms $(get "$tmp/load" max_ms)" \
        "rss_load_kib $(sort -g "$tmp/rss" | tail -1)" "errors $errors" "webhook_calls $n" \
        "requests $(get "$tmp/load" requests)" "cpu_s $cpu_used"; do
        record "$impl" "${kv%% *}" "$target" "${kv#* }" "$r"
      done
    done
    stop "$impl"
  done
  # the same load with no webhook (every At valid): the API server's part
  for target in "$rate" "$max"; do
    prog load "$ns" "$target" "$secs" 0 >"$tmp/load"
    for m in rate p50_ms p99_ms max_ms; do
      record none "$(case $m in rate) echo rate_achieved ;; *) echo "client_$m" ;; esac)" "$target" "$(get "$tmp/load" "$m")" "$r"
    done
  done
  table "round $r" "$r" >&2
done

{
  echo "luaop $("$bin" --version | head -1 | awk '{print $2}') ($script) against the controller-runtime $(awk '$1 == "sigs.k8s.io/controller-runtime" {print $2}' bench/peer/go.mod) peer (at-webhook), medians of $rounds rounds"
  echo "$(date -u +%Y-%m-%d), $(nproc) cores, Kubernetes $(kc get --raw /version | awk -F'"' '/gitVersion/ {print $4}'), dry-run creates of At, one in $every refused, $secs s a run; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  table measure
} | tee "$out/table.txt"

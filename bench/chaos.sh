#!/usr/bin/env bash
# bench/chaos.sh [SECONDS] [SEED] [RATE]: a soak of the four example
# operators through the chaos proxy (hack/chaos/main.go) with every fault
# it has, against the local control plane (make cluster-up); traffic only
# on this machine. For SECONDS (default 180), round after round: a Machine
# of 3 switches scaled to 2, three Ats due, a source secret for the copier,
# each round to its end state under faults. Then the faults stop and one
# more round is timed: how long luaop takes to converge after the last
# fault. Prints the faults injected by kind, luaop's relists, watch
# failures by reason, task restarts, retries, writes and worst RSS
# (VmHWM), and that convergence time. SEED (default 1) and RATE (the
# probability that a request gets a fault, default 0.3; a watch: 0.7, as
# watches are few, and each is ended within 10 to 20 s, as by a load
# balancer's timeout, so that watches come again) go to the proxy.
secs=${1:-180}
seed=${2:-1}
rate=${3:-0.3}
. "$(dirname "$0")/lib.sh" chaos
proxy=$(hack/chaos.sh bin)
kc config view --raw --minify --flatten -o json >"$tmp/upstream.json"
"$proxy" -upstream "$tmp/upstream.json" -dir "$tmp" -seed "$seed" -rate "$rate" -watch-rate 0.7 -watch-timeout 20 2>"$tmp/chaos.log" &
ppid=$!
trap 'kill $ppid 2>/dev/null; bench_cleanup' EXIT
wait_until "the proxy" test -s "$tmp/port"
chaos() { curl -s -m 5 --cacert "$tmp/ca.crt" "https://127.0.0.1:$(cat "$tmp/port")/chaos/$1"; }
kc apply -k manifests/crds >/dev/null
kc wait --for condition=Established crd --all --timeout=30s >/dev/null
kc get namespace secretsync >/dev/null 2>&1 || kc create namespace secretsync >/dev/null
"$bin" --kubeconfig "$tmp/kubeconfig" --script operators --metrics-bind-address 127.0.0.1:0 \
  --health-probe-bind-address 127.0.0.1:0 2>"$tmp/log" &
pid=$!
WAIT_SECONDS=120 wait_until "caches synced" grep -q "caches synced" "$tmp/log"
mport=$(sed -n 's/.*Serving metrics server.*"port": \([0-9]*\).*/\1/p' "$tmp/log")

# One round in namespace $1: the work, then its end state.
round() {
  local r=$1 when
  kc create namespace "$r" >/dev/null
  when=$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%SZ)
  {
    echo "{\"apiVersion\":\"useless.container.training/v1alpha1\",\"kind\":\"Machine\",\"metadata\":{\"name\":\"m\",\"namespace\":\"$r\"},\"spec\":{\"switches\":3}}"
    for i in 1 2 3; do
      echo "{\"apiVersion\":\"cnat.programming-kubernetes.info/v1alpha1\",\"kind\":\"At\",\"metadata\":{\"name\":\"at-$i\",\"namespace\":\"$r\"},\"spec\":{\"schedule\":\"$when\",\"command\":\"echo $i\"}}"
    done
  } | kc apply -f - >/dev/null
  kc create secret generic "src-$r" -n secretsync --type=k8s.ziwon.dev/secretsync --from-literal=password=one >/dev/null
  WAIT_SECONDS=180 wait_until "$r: three switches down" \
    sh -c "[ \"\$($KUBECTL --kubeconfig $KUBECONFIG get machine m -n $r -o jsonpath='{.status.positions}')\" = ddd ]"
  kc patch machine m -n "$r" --type=merge -p '{"spec":{"switches":2}}' >/dev/null
  WAIT_SECONDS=180 wait_until "$r: the end state" sh -c "
    k() { $KUBECTL --kubeconfig $KUBECONFIG \"\$@\"; }
    [ \"\$(k get machine m -n $r -o jsonpath='{.status.positions}')\" = dd ] &&
    [ \"\$(k get switches -n $r -l machine=m -o name | wc -l)\" = 2 ] &&
    [ \"\$(k get ats -n $r -o jsonpath='{.items[*].status.phase}')\" = 'DONE DONE DONE' ] &&
    [ \"\$(k get pods -n $r -o name | wc -l)\" = 3 ] &&
    [ \"\$(k get secret src-$r -n $r -o jsonpath='{.data.password}' 2>/dev/null)\" = b25l ]"
  kc delete secret "src-$r" -n secretsync --wait=false >/dev/null
  kc delete namespace "$r" --wait=false >/dev/null
}

rounds=0
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ]; do
  rounds=$((rounds + 1))
  round "$ns-r$rounds"
done
chaos stats >"$tmp/stats.json"
chaos pause >/dev/null
t0=$(date +%s.%N)
round "$ns-calm"
t1=$(date +%s.%N)
sleep 1
curl -s "http://127.0.0.1:$mport/metrics" >"$tmp/metrics"
peak=$(sed -n 's/^VmHWM:\s*\([0-9]*\) kB/\1/p' "/proc/$pid/status")
alive=yes
kill -0 "$pid" 2>/dev/null || alive=no
python3 - "$tmp/stats.json" "$tmp/metrics" "$rounds" "$secs" "$seed" "$rate" "$peak" "$t0" "$t1" "$alive" <<'PY'
import json, re, sys
stats = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
rounds, secs, seed, rate, peak, t0, t1, alive = sys.argv[3:11]
def total(name, match=""):
    n = 0.0
    for labels, v in re.findall(r'^%s\{([^}]*)\} (\S+)$' % name, text, re.M):
        if match in labels:
            n += float(v)
    return n
faults = {k[6:]: v for k, v in stats.items() if k.startswith("fault ")}
print("chaos soak: %s s, seed %s, rate %s: %s rounds, %d requests through the proxy" % (secs, seed, rate, rounds, stats.get("requests", 0)))
print("faults injected: %d (%s)" % (sum(faults.values()), ", ".join("%s %d" % kv for kv in sorted(faults.items()))))
reasons = re.findall(r'^luaop_watch_failures_total\{[^}]*reason="([^"]+)"\} (\S+)$', text, re.M)
by = {}
for r, v in reasons:
    by[r] = by.get(r, 0) + float(v)
print("watch failures by reason: %s" % ", ".join("%s %d" % kv for kv in sorted(by.items())))
print("relists: %d; task restarts: %d; retried requests (429/5xx): %d" % (
    total("luaop_informer_relists_total"), total("luaop_task_restarts_total"), total("luaop_rest_client_retries_total")))
print("writes: %d (POST %d, PUT %d, PATCH %d, DELETE %d)" % tuple(
    [sum(total("rest_client_requests_total", 'method="%s"' % m) for m in ("POST", "PUT", "PATCH", "DELETE"))] +
    [total("rest_client_requests_total", 'method="%s"' % m) for m in ("POST", "PUT", "PATCH", "DELETE")]))
print("worst RSS (VmHWM): %.1f MiB; alive at the end: %s" % (int(peak) / 1024.0, alive))
print("a round after the last fault converged in %.1f s" % (float(t1) - float(t0)))
PY

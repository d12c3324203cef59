#!/usr/bin/env bash
# bench/node.sh [resources|reload|all] [MACHINES]: luaop as a Pod on the local
# control plane's real node (make cluster-up; root), deployed from the
# shipped manifests through spec/incluster/overlay, the image from
# `make image` imported into the node.
#
#   resources  the leader's container, read from its cgroup and /proc by the
#              node (what the kubelet accounts): memory (cgroup usage and the
#              process's VmRSS/VmHWM) and CPU (cpuacct) idle over 30 s, then
#              while MACHINES (default 300) Machines of 3 Switches each
#              converge, and the standby's beside it. The manifests'
#              requests and limits come from these figures (docs/deploy.md).
#   reload     from `kubectl apply` of a changed operators ConfigMap to the
#              leader running the new at.lua (its luaop_script_reloads_total
#              going up), 5 rounds with the node's 5 s kubelet sync period,
#              then 3 rounds with the kubelet's default (the node is started
#              again without syncFrequency for them, and once more with 5 s
#              after); and the syncs (LISTs or streamed) luaop made meanwhile (the API server's
#              audit log; goal 0)
set -euo pipefail
what=${1:-all}
machines=${2:-300}
. "$(dirname "$0")/lib.sh" node
[ "$(id -u)" = 0 ] || { echo "bench: needs root (the node's cgroups and containerd)" >&2; exit 1; }
kc get node luaop-node >/dev/null 2>&1 || { echo "bench: the control plane has no real node (make cluster-up)" >&2; exit 1; }
audit=build/cluster/kwok/clusters/luaop/logs/audit.log

deploy() {
  hack/image.sh luaop:latest >"$tmp/image.log" 2>&1 || { tail -n 20 "$tmp/image.log" >&2; exit 1; }
  hack/node.sh import luaop:latest
  kc apply -k spec/incluster/overlay >/dev/null
  # /metrics is HTTPS for metrics-readers only (the manifests'
  # --metrics-secure): a ServiceAccount of the bench's, bound to the role
  kc -n default create serviceaccount luaop-bench-scraper >/dev/null 2>&1 || true
  kc create clusterrolebinding luaop-bench-scraper --clusterrole luaop-metrics-reader \
    --serviceaccount default:luaop-bench-scraper >/dev/null 2>&1 || true
  printf 'Authorization: Bearer %s\n' "$(kc -n default create token luaop-bench-scraper --duration 2h)" >"$tmp/auth"
  WAIT_SECONDS=180 wait_until "two Ready luaop Pods" two_ready
}
two_ready() {
  [ "$(kc -n luaop-system get pods -l app.kubernetes.io/name=luaop \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" = 2 ]
}
leader() { kc -n luaop-system get lease luaop -o jsonpath='{.spec.holderIdentity}' | sed 's/_[0-9a-f]*$//'; }
pod_ip() { kc -n luaop-system get pod "$1" -o jsonpath='{.status.podIP}'; }
# the container's main process, as the node runs it
pod_pid() {
  local id
  id=$(kc -n luaop-system get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}' | sed 's|^containerd://||')
  hack/node.sh ctr tasks ls | awk -v id="$id" '$1 == id { print $2 }'
}
cg() { # PID CONTROLLER FILE
  echo "/sys/fs/cgroup/$2$(awk -F: -v c="$2" '$2 ~ "(^|,)" c "(,|$)" { print $3 }' "/proc/$1/cgroup")/$3"
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
kib_mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
cpu_ns() { cat "$(cg "$1" cpuacct cpuacct.usage)"; }

# measure NAME PID SECONDS [COMMAND...]: CPU and peak memory over a period
# (sampled every 0.2 s), or while COMMAND runs
measure() {
  local name=$1 p=$2 secs=$3 t0 c0 c1 t1 peak=0 u
  shift 3
  t0=$(date +%s.%N)
  c0=$(cpu_ns "$p")
  if (($#)); then "$@" & local job=$!; fi
  while :; do
    u=$(cat "$(cg "$p" memory memory.usage_in_bytes)")
    [ "$u" -gt "$peak" ] && peak=$u
    if (($#)); then kill -0 "$job" 2>/dev/null || break; else
      awk -v a="$t0" -v b="$(date +%s.%N)" -v s="$secs" 'BEGIN { exit !(b - a < s) }' || break
    fi
    sleep 0.2
  done
  if (($#)); then wait "$job"; fi
  c1=$(cpu_ns "$p")
  t1=$(date +%s.%N)
  printf '%-34s %6.1f s  CPU %5.0f m  cgroup memory peak %6s MiB  VmRSS %6s MiB  VmHWM %6s MiB\n' "$name" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
    "$(awk -v a="$c0" -v b="$c1" -v x="$t0" -v y="$t1" 'BEGIN { print (b - a) / 1e6 / (y - x) }')" \
    "$(mib "$peak")" "$(kib_mib "$(status_kb "$p" VmRSS)")" "$(kib_mib "$(status_kb "$p" VmHWM)")"
}

converge() {
  local i
  for i in $(seq 1 "$machines"); do
    printf -- '---\napiVersion: useless.container.training/v1alpha1\nkind: Machine\nmetadata: {name: m-%d}\nspec: {switches: 3}\n' "$i"
  done | kc apply -n "$ns" -f - >/dev/null
  WAIT_SECONDS=600 wait_until "$machines Machines converged" converged
}
converged() {
  [ "$(kc -n "$ns" get machines -o jsonpath='{range .items[*]}{.status.positions}{"\n"}{end}' | grep -c '^ddd$')" = "$machines" ]
}

resources() {
  local l s lp sp
  l=$(leader)
  s=$(kc -n luaop-system get pods -l app.kubernetes.io/name=luaop -o name | sed 's|pod/||' | grep -v "^$l$")
  lp=$(pod_pid "$l")
  sp=$(pod_pid "$s")
  echo "leader $l (pid $lp), standby $s (pid $sp); limits: $(kc -n luaop-system get deploy luaop -o jsonpath='{.spec.template.spec.containers[0].resources}')"
  measure "leader, idle" "$lp" 30
  measure "standby, idle" "$sp" 10
  measure "leader, $machines Machines converging" "$lp" 0 converge
  measure "leader, idle after (cache holds them)" "$lp" 15
  measure "standby, after (cache holds them)" "$sp" 5
  kc -n "$ns" delete machines --all --wait=false >/dev/null
}

# rounds N LABEL: N ConfigMap changes, each timed to the leader's reload
rounds() {
  local n=$1 label=$2 i l ip before t0 t1 lists0 times=()
  l=$(leader)
  ip=$(pod_ip "$l")
  lists0=$(lists)
  for i in $(seq 1 "$n"); do
    before=$(reloads "$ip")
    cp operators/*.lua "$tmp/" && printf '\n-- bench/node.sh round %s %s\n' "$i" "$(date +%s%N)" >>"$tmp/at.lua"
    kc create configmap luaop-operators -n luaop-system --from-file="$tmp/" --dry-run=client -o yaml >"$tmp/cm.yaml"
    rm -f "$tmp"/*.lua
    t0=$(date +%s.%N)
    kc apply -f "$tmp/cm.yaml" >/dev/null
    WAIT_SECONDS=180 wait_until "the leader's reload" reloaded "$ip" "$before"
    t1=$(date +%s.%N)
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')")
  done
  printf '%-44s %s s (each round); median %s s, worst %s s; LISTs meanwhile: %d\n' "$label" "${times[*]}" \
    "$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')" \
    "$(printf '%s\n' "${times[@]}" | sort -n | tail -n 1)" "$(($(lists) - lists0))"
}
reloads() {
  curl -sS -m 5 -k -H @"$tmp/auth" "https://$1:8443/metrics" | awk '/^luaop_script_reloads_total\{.*at\.lua",result="success"\}/ { s += $2 } END { print s + 0 }'
}
reloaded() { [ "$(reloads "$1")" -gt "$2" ]; }
# (the audit policy records only luaop's LISTs and watches): LISTs once
# complete, and watches that stream a sync (sendInitialEvents) as they start
lists() {
  awk '/"verb":"list"/ && /"stage":"ResponseComplete"/ {n++}
       /"verb":"watch"/ && /"stage":"ResponseStarted"/ && /sendInitialEvents=true/ {n++} END {print n + 0}' "$audit"
}

reload() {
  rounds 5 "kubelet syncFrequency 5 s (the spec's node)"
  LUAOP_NODE_SYNC=default hack/node.sh up
  deploy
  rounds 3 "kubelet syncFrequency default (1 min)"
  hack/node.sh up
  deploy
}

deploy
case $what in
  resources) resources ;;
  reload) reload ;;
  all) resources; reload ;;
  *) echo "usage: bench/node.sh [resources|reload|all] [MACHINES]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The local Kubernetes control plane luaop is developed and tested against.
#
#   hack/cluster.sh bin     build (or find cached) the pinned binaries
#   hack/cluster.sh up      start etcd, kube-apiserver, kube-controller-manager,
#                           kube-scheduler and kwok with one Ready fake node,
#                           and a real node (hack/node.sh: kubelet, kube-proxy,
#                           containerd; LUAOP_NODE=0 leaves it out);
#                           admin kubeconfig in build/cluster/kubeconfig
#   hack/cluster.sh down    stop them all and remove the cluster's state
#   hack/cluster.sh status  exit 0 when the API server answers /readyz
#   hack/cluster.sh show    print what the cluster has
#   hack/cluster.sh env     print the paths as shell assignments
#   hack/cluster.sh compact compact etcd up to its current revision, so that
#                           older resourceVersions are gone (410 Gone)
#   hack/cluster.sh restart-apiserver
#                           stop only the kube-apiserver (SIGKILL), start it
#                           again with the command line, environment and
#                           directory it ran with, and wait until /readyz
#                           answers, the controller manager and scheduler
#                           have renewed their leader Leases (one that gave up
#                           while the API server was down is started again),
#                           and a new namespace gets its ServiceAccount and a
#                           Pod in it runs
#   hack/cluster.sh pause-controllers
#                           stop kube-controller-manager, kube-scheduler and
#                           kwok (recorded as restart-apiserver records
#                           them), so that the API server serves a benchmark
#                           alone: nothing else watches or writes (no
#                           garbage collector's informers, no scheduler, no
#                           fake node's heartbeats, no node controller to
#                           mark it NotReady meanwhile)
#   hack/cluster.sh resume-controllers
#                           start them again and wait until the controller
#                           manager and scheduler have renewed their leader
#                           Leases
#
# Binaries are built from the Go module proxy (see hack/k8s/go.mod) into a
# cache outside the repository, keyed by version:
#   ${LUAOP_CACHE:-${XDG_CACHE_HOME:-~/.cache}/luaop}/k8s-<ver>-etcd-<ver>/
#   ${LUAOP_CACHE:-...}/kwok-<ver>/
# with Go's own module and build caches beside them. `up` and `down` are
# idempotent. kwokctl (binary runtime) starts and stops the processes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=paths.sh
. "$root/hack/paths.sh"
name=luaop

export KWOK_WORKDIR="$cluster_dir/kwok"
export KWOK_KUBE_VERSION="$KUBE_VERSION"
export KWOK_KUBECTL_BINARY="$k8s_bin/kubectl"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# go build of Kubernetes packages from hack/k8s into DEST, stamped with the
# release's version as Kubernetes' own build stamps it.
go_build_k8s() {
  local dest=$1 go v ldflags
  shift
  go=$(find_go) || die "Go is needed to build the control plane (run 'make deps' for details)"
  v=k8s.io/component-base/version
  ldflags="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=$(echo "$KUBE_VERSION" | cut -d. -f1 | tr -d v)"
  ldflags+=" -X $v.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $v.gitTreeState=clean"
  ldflags+=" -X $v.buildDate=1970-01-01T00:00:00Z"
  (cd "$root/hack/k8s" && go_env "$go" build -trimpath -ldflags="$ldflags" -o "$dest/" "$@")
}

build_k8s() {
  local want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd) missing=0 b
  for b in "${want[@]}"; do [ -x "$k8s_bin/$b" ] || missing=1; done
  [ "$missing" = 0 ] && return 0

  local tmp start=$SECONDS
  tmp="$k8s_bin.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION (first time only; takes a while)"
  go_build_k8s "$tmp" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubectl \
      k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy \
      go.etcd.io/etcd/server/v3 ||
    die "building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION failed (go's output above): check the network to the Go module proxy (GOPROXY) and the free space in $cache"
  mv "$tmp/v3" "$tmp/etcd" 2>/dev/null || mv "$tmp/server" "$tmp/etcd"
  rm -rf "$k8s_bin" && mv "$tmp" "$k8s_bin"
  log "built Kubernetes binaries in $((SECONDS - start)) s"
}

build_kwok() {
  [ -x "$kwok_bin/kwok" ] && [ -x "$kwok_bin/kwokctl" ] && return 0
  local go tmp start=$SECONDS
  go=$(find_go) || die "Go is needed to build the control plane (run 'make deps' for details)"
  tmp="$kwok_bin.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "building kwok $KWOK_VERSION (first time only)"
  (cd "$tmp" && go_env GOBIN="$tmp" "$go" install -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
      "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION") ||
    die "building kwok $KWOK_VERSION failed (go's output above): check the network to the Go module proxy (GOPROXY) and the free space in $cache"
  rm -rf "$kwok_bin" && mv "$tmp" "$kwok_bin"
  log "built kwok in $((SECONDS - start)) s"
}

# The real node's kubelet and kube-proxy, built with the rest above; this
# adds them to a cache made before they were (the same module, flags and Go
# caches, so little is compiled anew).
build_node() {
  [ -x "$k8s_bin/kubelet" ] && [ -x "$k8s_bin/kube-proxy" ] && return 0
  local tmp start=$SECONDS
  tmp="$k8s_bin.node.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "building the kubelet and kube-proxy $KUBE_VERSION (first time only)"
  go_build_k8s "$tmp" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy ||
    die "building the kubelet and kube-proxy $KUBE_VERSION failed (go's output above): check the network to the Go module proxy (GOPROXY) and the free space in $cache"
  mv "$tmp/kubelet" "$tmp/kube-proxy" "$k8s_bin/" && rm -rf "$tmp"
  log "built the kubelet and kube-proxy in $((SECONDS - start)) s"
}

# LUAOP_NODE=0 leaves the real node out (the e2e specs need none; the
# in-cluster specs do), as does a machine that cannot run it (hack/node.sh
# supported says why).
with_node() { [ "${LUAOP_NODE:-1}" != 0 ] && "$root/hack/node.sh" supported 2>/dev/null; }

cmd_bin() {
  mkdir -p "$cache" "$root/build/bin" || die "could not create $cache (set LUAOP_CACHE to a writable directory)"
  build_kwok
  build_k8s
  with_node && build_node
  # The kubectl of the same release, at a stable path.
  ln -sfn "$k8s_bin/kubectl" "$root/build/bin/kubectl"
}

kwokctl() { "$kwok_bin/kwokctl" --name "$name" "$@"; }
kubectl() { "$k8s_bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# The API server's readiness, asked with the admin kubeconfig.
ready() {
  [ -f "$kubeconfig" ] && [ -x "$k8s_bin/kubectl" ] &&
    kubectl get --raw /readyz --request-timeout=3s >/dev/null 2>&1
}

# Processes started from this cluster's work directory (the binaries get it in
# their flags), whether or not kwokctl still knows about them.
leftovers() {
  pgrep -f -- "$KWOK_WORKDIR/" || true
}

node_ready() {
  kubectl wait --for=condition=Ready node --all --timeout="$1" >/dev/null 2>&1
}

cmd_up() {
  cmd_bin
  if ready && kubectl get nodes -o name 2>/dev/null | grep -q . && node_ready 30s &&
      { ! with_node || kubectl get node luaop-node >/dev/null 2>&1; }; then
    log "already up; kubeconfig: build/cluster/kubeconfig"
    return 0
  fi
  local start=$SECONDS
  # Whatever is left from an earlier run (a crash, a reboot) goes first.
  cmd_down quiet
  [ "${LUAOP_NODE:-1}" = 0 ] || "$root/hack/node.sh" supported || log "going on without it (spec/incluster will be skipped)"
  if with_node; then
    "$root/hack/node.sh" check ||
      die "not starting: the real node would collide with the above (LUAOP_NODE=0 starts the control plane without it)"
  fi
  mkdir -p "$cluster_dir"
  # the configuration, with the paths of this cluster's certificates
  sed -e "s|@PKI@|$KWOK_WORKDIR/clusters/$name/pki|g" -e "s|@ROOT@|$root|g" "$root/hack/kwok/kwokctl.yaml" >"$cluster_dir/kwokctl.yaml"
  log "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok"
  if ! kwokctl create cluster --runtime binary \
      --kube-apiserver-binary "$k8s_bin/kube-apiserver" \
      --kube-controller-manager-binary "$k8s_bin/kube-controller-manager" \
      --kube-scheduler-binary "$k8s_bin/kube-scheduler" \
      --etcd-binary "$k8s_bin/etcd" \
      --kwok-controller-binary "$kwok_bin/kwok" \
      --kube-authorization=true \
      --secure-port=true \
      --config "$cluster_dir/kwokctl.yaml" \
      --kubeconfig "$kubeconfig" \
      --quiet-pull \
      --wait 2m >"$cluster_dir/create.log" 2>&1; then
    cat "$cluster_dir/create.log" >&2
    die "kwokctl create cluster failed; component logs: build/cluster/kwok/clusters/$name/logs/"
  fi
  kubectl config use-context "kwok-$name" >/dev/null ||
    die "kwokctl wrote no context kwok-$name into build/cluster/kubeconfig"
  kwokctl scale node --replicas 1 >>"$cluster_dir/create.log" 2>&1 ||
    die "could not create the fake node; see build/cluster/create.log"
  node_ready 60s || die "the fake node did not become Ready; see build/cluster/kwok/clusters/$name/logs/"
  # Namespaces get their default ServiceAccount from the controller manager;
  # wait for it so Pods can be created as soon as this returns.
  local i
  for i in $(seq 1 60); do
    kubectl get serviceaccount default -n default >/dev/null 2>&1 && break
    [ "$i" -lt 60 ] || die "the controller manager gave namespace default no ServiceAccount within 30 s; see build/cluster/kwok/clusters/$name/logs/kube-controller-manager.log"
    sleep 0.5
  done
  if with_node; then
    "$root/hack/node.sh" up || die "the real node did not start (above); build/cluster/node/logs/ has its logs"
  fi
  log "up in $((SECONDS - start)) s; kubeconfig: build/cluster/kubeconfig (kubectl of the same release: build/bin/kubectl)"
}

cmd_down() {
  local quiet=${1:-} started
  # the real node first, while the API server can still see its Pods go
  "$root/hack/node.sh" down quiet || die "could not take the real node down (above)"
  # The processes kwokctl started, to see them gone (reaped, not even zombies).
  local f
  started=""
  for f in "$KWOK_WORKDIR/clusters/$name/pids/"*.pid; do
    [ -f "$f" ] && started+=" $(cat "$f")"
  done
  if [ -x "$kwok_bin/kwokctl" ] && [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
    kwokctl delete cluster --kubeconfig "$kubeconfig" >/dev/null 2>&1 || true
  fi
  # kwokctl stops what it started; anything that survived it is stopped here,
  # so that no etcd, kube-apiserver or kwok outlives `down`.
  local pids i
  pids=$(leftovers)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    for i in $(seq 1 50); do
      [ -z "$(leftovers)" ] && break
      sleep 0.2
    done
    pids=$(leftovers)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    sleep 0.2
    [ -z "$(leftovers)" ] || die "could not stop: $(leftovers | tr '\n' ' ')"
  fi
  # An exited process lingers as a zombie until init reaps it; wait for that
  # (bounded), so that nothing of the cluster shows in ps after `down`.
  local pid deadline=$((SECONDS + 15))
  for pid in $started; do
    while [ -e "/proc/$pid" ] && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.1
    done
  done
  rm -rf "$KWOK_WORKDIR" "$kubeconfig"
  [ -n "$quiet" ] || log "down"
}

cmd_status() {
  if ready; then
    log "up; kubeconfig: build/cluster/kubeconfig"
  else
    log "down"
    return 1
  fi
}

cmd_show() {
  ready || die "not running; run 'make cluster-up'"
  echo "Local control plane ($KUBE_VERSION, kwok $KWOK_VERSION):"
  kubectl version 2>/dev/null | sed 's/^/  /'
  echo
  kubectl get nodes -o wide
  echo
  kubectl get namespaces
  echo
  echo "Use it with:  $k8s_bin/kubectl --kubeconfig build/cluster/kubeconfig get nodes"
  echo "Stop it with: make cluster-down"
}

# etcd's client URL, from the flags of the cluster's kube-apiserver.
etcd_url() {
  { pgrep -af -- "$KWOK_WORKDIR/.*kube-apiserver" || true; } | grep -o -- '--etcd-servers=[^ ]*' | head -n 1 | cut -d= -f2 || true
}

cmd_compact() {
  local url rev
  url=$(etcd_url)
  [ -n "$url" ] || die "not running; run 'make cluster-up'"
  # etcd's JSON gateway: the current revision, then a compaction to it.
  rev=$(curl -sS --fail -X POST "$url/v3/kv/range" -d '{"key":"AA=="}' |
    grep -o '"revision":"[0-9]*"' | head -n 1 | grep -o '[0-9]*') || rev=""
  [ -n "$rev" ] || die "could not read etcd's revision from $url"
  curl -sS --fail -X POST "$url/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null ||
    die "etcd at $url refused the compaction to revision $rev"
  log "compacted etcd to revision $rev"
}

# The pid of a running component of this cluster (kwokctl records it in
# pids/<name>.pid), or nothing. A pid that now belongs to another process, or
# to a zombie (no cmdline), does not count.
component_pid() {
  local f="$KWOK_WORKDIR/clusters/$name/pids/$1.pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  case "$pid" in '' | *[!0-9]*) return 0 ;; esac
  [ "$(head -z -n 1 "/proc/$pid/cmdline" 2>/dev/null | tr -d '\0')" = "$KWOK_WORKDIR/clusters/$name/bin/$1" ] &&
    echo "$pid"
}

# Whether a process has exited: gone, or a zombie waiting for init. Every
# thread counts: a killed Go program shows as a zombie as soon as its main
# thread is done, while other threads still hold its files (a listening port
# then stays taken for a moment).
exited() {
  local s state
  for s in "/proc/$1/task/"*/stat; do
    state=$(sed -n 's/.*) \(.\).*/\1/p' "$s" 2>/dev/null) || state=""
    [ -z "$state" ] || [ "$state" = Z ] || return 1
  done
  return 0
}

# kwokctl v0.8.0 stops and starts whole clusters only (its binary runtime has
# per-component StopComponent/StartComponent, but no command reaches them), so
# a component is restarted here the way that runtime starts one: the binary in
# a session of its own, in the component's work directory, stdout and stderr to
# logs/<name>.log, its pid in pids/<name>.pid (which `kwokctl delete cluster`
# and `down` read). What it runs is recorded from the running process first
# (cmdline/<name>, environ/<name>, cwd/<name> in the cluster's directory, the
# NUL-separated /proc files), so it is exactly what kwokctl ran.
record_component() {
  local comp=$1 pid=$2 d="$KWOK_WORKDIR/clusters/$name"
  mkdir -p "$d/cmdline" "$d/environ" "$d/cwd"
  { cat "/proc/$pid/cmdline" >"$d/cmdline/$comp" &&
    cat "/proc/$pid/environ" >"$d/environ/$comp" &&
    readlink "/proc/$pid/cwd" >"$d/cwd/$comp"; } 2>/dev/null || die "$comp (pid $pid) exited while its command line was read"
  [ -s "$d/cmdline/$comp" ] && [ -s "$d/cwd/$comp" ] || die "could not read how $comp was started"
}

stop_component() {
  local comp=$1 pid=$2 i
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    exited "$pid" && return 0
    sleep 0.1
  done
  die "could not stop $comp (pid $pid)"
}

# Start a recorded component; prints its pid.
start_component() {
  local comp=$1 d="$KWOK_WORKDIR/clusters/$name" cwd newpid i
  local -a argv envv
  local logf="$d/logs/$comp.log"
  mapfile -d '' argv <"$d/cmdline/$comp"
  mapfile -d '' envv <"$d/environ/$comp"
  cwd=$(cat "$d/cwd/$comp")
  printf '\n==== hack/cluster.sh: %s started again at %s ====\n' "$comp" "$(date -u +%FT%TZ)" >>"$logf"
  # Not a process group leader (no job control in a script), so setsid execs
  # in place and $! is the component's pid. A session of its own keeps it out
  # of the caller's signals (^C of a test run), as kwokctl's are.
  (cd "$cwd" && exec setsid env -i "${envv[@]}" "${argv[@]}" </dev/null >>"$logf" 2>&1) &
  newpid=$!
  printf '%s' "$newpid" >"$d/pids/$comp.pid" # no newline: kwokctl parses it as is
  for i in $(seq 1 50); do
    [ "$(component_pid "$comp")" = "$newpid" ] && break
    exited "$newpid" && die "$comp exited at once; see build/cluster/kwok/clusters/$name/logs/$comp.log"
    sleep 0.1
  done
  [ "$(component_pid "$comp")" = "$newpid" ] || die "$comp did not start as pid $newpid"
  echo "$newpid"
}

# The components behind the API server: what wait_components_since waits
# for and pause-controllers stops.
controllers=(kube-controller-manager kube-scheduler kwok-controller)

# Seconds since the epoch of a Lease's renewTime in kube-system (0 if none).
lease_renewed() {
  local t
  t=$(kubectl -n kube-system get lease "$1" -o jsonpath='{.spec.renewTime}' --request-timeout=3s 2>/dev/null) || t=""
  if [ -n "$t" ]; then date -d "$t" +%s; else echo 0; fi
}

# The controller manager and the scheduler give up (exit) when they cannot
# renew their leader Lease for 10 s; kwok does not. Wait until each recorded
# one has renewed since `since`, starting again any that exited (once).
wait_components_since() {
  local since=$1 comp pending deadline=$((SECONDS + 90))
  local -A restarted=()
  while :; do
    pending=""
    for comp in "${controllers[@]}"; do
      [ -s "$KWOK_WORKDIR/clusters/$name/cmdline/$comp" ] || continue
      if [ -z "$(component_pid "$comp")" ]; then
        [ -z "${restarted[$comp]:-}" ] || die "$comp exited again; see build/cluster/kwok/clusters/$name/logs/$comp.log"
        log "$comp exited while the API server was down (it lost its leader lease); starting it again"
        start_component "$comp" >/dev/null
        restarted[$comp]=1
      fi
      [ "$comp" = kwok-controller ] || [ "$(lease_renewed "$comp")" -ge "$since" ] || pending+=" $comp"
    done
    [ -z "$pending" ] && return 0
    [ "$SECONDS" -lt "$deadline" ] || die "no leader Lease renewed within 90 s:$pending"
    sleep 0.2
  done
}

# Whether the controllers behind the API server work again: their informers
# back off while it is down (client-go: up to a minute after restarts in a
# row). A new namespace must get its default ServiceAccount (the controller
# manager), and a Pod in it must be scheduled and run (the scheduler, kwok).
probe_controllers() {
  local ns ok="" deadline=$((SECONDS + 90))
  ns="restart-probe-$(date +%s)-$RANDOM"
  kubectl create namespace "$ns" >/dev/null || die "could not create namespace $ns"
  while [ "$SECONDS" -lt "$deadline" ]; do
    kubectl get serviceaccount default -n "$ns" >/dev/null 2>&1 && ok=1 && break
    sleep 0.5
  done
  if [ -n "$ok" ]; then
    ok=""
    kubectl run probe -n "$ns" --image=busybox --restart=Always >/dev/null 2>&1 &&
      kubectl wait --for=condition=Ready pod/probe -n "$ns" --timeout=90s >/dev/null 2>&1 && ok=1
  fi
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  [ -n "$ok" ] || die "the controllers did not come back: no ServiceAccount or running Pod in namespace $ns within 90 s"
}

cmd_restart_apiserver() {
  ready || die "not running; run 'make cluster-up'"
  local start=$SECONDS pid comp since d="$KWOK_WORKDIR/clusters/$name"
  [ ! -d "$d/paused" ] || die "the controllers are paused: run 'hack/cluster.sh resume-controllers' first"
  rm -rf "$d/cmdline" "$d/environ" "$d/cwd" # only what runs now
  for comp in kube-apiserver kube-controller-manager kube-scheduler kwok-controller; do
    pid=$(component_pid "$comp")
    [ -n "$pid" ] && record_component "$comp" "$pid"
  done
  pid=$(component_pid kube-apiserver)
  [ -n "$pid" ] || die "kube-apiserver is not running; run 'make cluster-up'"
  # SIGKILL: on SIGTERM it stops listening at once but keeps its open watches
  # (it was still running 30 s later), and the controller manager and
  # scheduler exit after 10 s without it.
  stop_component kube-apiserver "$pid"
  pid=$(start_component kube-apiserver) || exit 1
  until ready; do
    exited "$pid" && die "kube-apiserver exited; see build/cluster/kwok/clusters/$name/logs/kube-apiserver.log"
    [ "$((SECONDS - start))" -lt 60 ] || die "kube-apiserver is not ready 60 s after its restart"
    sleep 0.1
  done
  since=$(date +%s)
  log "kube-apiserver restarted (pid $pid), ready in $((SECONDS - start)) s"
  wait_components_since "$since" || exit 1
  probe_controllers || exit 1
  log "the controller manager, scheduler and kwok work again after $((SECONDS - start)) s"
}

# The controllers pause-controllers stopped are listed in paused/ (one
# file each) beside their records.
cmd_pause_controllers() {
  ready || die "not running; run 'make cluster-up'"
  local comp pid d="$KWOK_WORKDIR/clusters/$name"
  mkdir -p "$d/paused"
  for comp in "${controllers[@]}"; do
    pid=$(component_pid "$comp")
    [ -n "$pid" ] || continue
    record_component "$comp" "$pid"
    : >"$d/paused/$comp" # (marked first: one that dies stopping is still started again)
    stop_component "$comp" "$pid"
  done
  log "paused the controller manager, scheduler and kwok ($(ls "$d/paused" | tr '\n' ' ')); resume-controllers starts them"
}

cmd_resume_controllers() {
  ready || die "not running; run 'make cluster-up'"
  local comp since d="$KWOK_WORKDIR/clusters/$name"
  [ -d "$d/paused" ] || { log "no controller is paused"; return 0; }
  since=$(date +%s)
  for comp in "${controllers[@]}"; do
    [ -e "$d/paused/$comp" ] || continue
    [ -n "$(component_pid "$comp")" ] || start_component "$comp" >/dev/null
    rm -f "$d/paused/$comp"
  done
  rmdir "$d/paused"
  wait_components_since "$since" || exit 1
  log "the controller manager, scheduler and kwok run again"
}

cmd_env() {
  printf 'KUBECONFIG=%q\nKUBECTL=%q\nK8S_BIN=%q\nKWOK_BIN=%q\n' \
    "$kubeconfig" "$k8s_bin/kubectl" "$k8s_bin" "$kwok_bin"
}

case "${1:-}" in
  bin) cmd_bin ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  show) cmd_show ;;
  env) cmd_env ;;
  compact) cmd_compact ;;
  restart-apiserver) cmd_restart_apiserver ;;
  pause-controllers) cmd_pause_controllers ;;
  resume-controllers) cmd_resume_controllers ;;
  *) echo "usage: hack/cluster.sh bin|up|down|status|show|env|compact|restart-apiserver|pause-controllers|resume-controllers" >&2
    exit 2 ;;
esac

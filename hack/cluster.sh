#!/usr/bin/env bash
# The local Kubernetes control plane luaop is developed and tested against.
#
#   hack/cluster.sh bin     build (or find cached) the pinned binaries
#   hack/cluster.sh up      start etcd, kube-apiserver, kube-controller-manager,
#                           kube-scheduler and kwok with one Ready fake node;
#                           admin kubeconfig in build/cluster/kubeconfig
#   hack/cluster.sh down    stop them all and remove the cluster's state
#   hack/cluster.sh status  exit 0 when the API server answers /readyz
#   hack/cluster.sh show    print what the cluster has
#   hack/cluster.sh env     print the paths as shell assignments
#   hack/cluster.sh compact compact etcd up to its current revision, so that
#                           older resourceVersions are gone (410 Gone)
#
# Binaries are built from the Go module proxy (see hack/k8s/go.mod) into a
# cache outside the repository, keyed by version:
#   ${LUAOP_CACHE:-${XDG_CACHE_HOME:-~/.cache}/luaop}/k8s-<ver>-etcd-<ver>/
#   ${LUAOP_CACHE:-...}/kwok-<ver>/
# with Go's own module and build caches beside them. `up` and `down` are
# idempotent. kwokctl (binary runtime) starts and stops the processes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=versions.env
. "$root/hack/versions.env"

cache=${LUAOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/luaop}
k8s_bin="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
kwok_bin="$cache/kwok-$KWOK_VERSION/bin"
cluster_dir="$root/build/cluster"
kubeconfig="$cluster_dir/kubeconfig"
name=luaop

export KWOK_WORKDIR="$cluster_dir/kwok"
export KWOK_KUBE_VERSION="$KUBE_VERSION"
export KWOK_KUBECTL_BINARY="$k8s_bin/kubectl"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [ -x /usr/local/go/bin/go ]; then
    echo /usr/local/go/bin/go
  else
    die "Go is needed to build the control plane (run 'make deps' for details)"
  fi
}

go_env() {
  # Go's caches live beside the binaries, outside the repository.
  env GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-buildvcs=false GOTOOLCHAIN=auto "$@"
}

build_k8s() {
  local want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd) missing=0 b
  for b in "${want[@]}"; do [ -x "$k8s_bin/$b" ] || missing=1; done
  [ "$missing" = 0 ] && return 0

  local go tmp v ldflags start=$SECONDS
  go=$(find_go)
  tmp="$k8s_bin.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  v=k8s.io/component-base/version
  ldflags="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=$(echo "$KUBE_VERSION" | cut -d. -f1 | tr -d v)"
  ldflags+=" -X $v.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $v.gitTreeState=clean"
  ldflags+=" -X $v.buildDate=1970-01-01T00:00:00Z"
  log "building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION (first time only; takes a while)"
  (cd "$root/hack/k8s" && go_env "$go" build -trimpath -ldflags="$ldflags" -o "$tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubectl \
      go.etcd.io/etcd/server/v3)
  mv "$tmp/v3" "$tmp/etcd" 2>/dev/null || mv "$tmp/server" "$tmp/etcd"
  rm -rf "$k8s_bin" && mv "$tmp" "$k8s_bin"
  log "built Kubernetes binaries in $((SECONDS - start)) s"
}

build_kwok() {
  [ -x "$kwok_bin/kwok" ] && [ -x "$kwok_bin/kwokctl" ] && return 0
  local go tmp start=$SECONDS
  go=$(find_go)
  tmp="$kwok_bin.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "building kwok $KWOK_VERSION (first time only)"
  (cd "$tmp" && go_env GOBIN="$tmp" "$go" install -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
      "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION")
  rm -rf "$kwok_bin" && mv "$tmp" "$kwok_bin"
  log "built kwok in $((SECONDS - start)) s"
}

cmd_bin() {
  mkdir -p "$cache" "$root/build/bin"
  build_kwok
  build_k8s
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
  if ready && kubectl get nodes -o name 2>/dev/null | grep -q . && node_ready 30s; then
    log "already up; kubeconfig: build/cluster/kubeconfig"
    return 0
  fi
  local start=$SECONDS
  # Whatever is left from an earlier run (a crash, a reboot) goes first.
  cmd_down quiet
  mkdir -p "$cluster_dir"
  log "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok"
  if ! kwokctl create cluster --runtime binary \
      --kube-apiserver-binary "$k8s_bin/kube-apiserver" \
      --kube-controller-manager-binary "$k8s_bin/kube-controller-manager" \
      --kube-scheduler-binary "$k8s_bin/kube-scheduler" \
      --etcd-binary "$k8s_bin/etcd" \
      --kwok-controller-binary "$kwok_bin/kwok" \
      --kube-authorization=true \
      --secure-port=true \
      --config "$root/hack/kwok/kwokctl.yaml" \
      --kubeconfig "$kubeconfig" \
      --quiet-pull \
      --wait 2m >"$cluster_dir/create.log" 2>&1; then
    cat "$cluster_dir/create.log" >&2
    die "kwokctl create cluster failed; component logs: build/cluster/kwok/clusters/$name/logs/"
  fi
  kubectl config use-context "kwok-$name" >/dev/null
  kwokctl scale node --replicas 1 >>"$cluster_dir/create.log" 2>&1 ||
    die "could not create the fake node; see build/cluster/create.log"
  node_ready 60s || die "the fake node did not become Ready; see build/cluster/kwok/clusters/$name/logs/"
  # Namespaces get their default ServiceAccount from the controller manager;
  # wait for it so Pods can be created as soon as this returns.
  local i
  for i in $(seq 1 60); do
    kubectl get serviceaccount default -n default >/dev/null 2>&1 && break
    sleep 0.5
  done
  log "up in $((SECONDS - start)) s; kubeconfig: build/cluster/kubeconfig (kubectl of the same release: build/bin/kubectl)"
}

cmd_down() {
  local quiet=${1:-} started
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
  pgrep -af -- "$KWOK_WORKDIR/.*kube-apiserver" | grep -o -- '--etcd-servers=[^ ]*' | head -n 1 | cut -d= -f2
}

cmd_compact() {
  local url rev
  url=$(etcd_url)
  [ -n "$url" ] || die "not running; run 'make cluster-up'"
  # etcd's JSON gateway: the current revision, then a compaction to it.
  rev=$(curl -sS --fail -X POST "$url/v3/kv/range" -d '{"key":"AA=="}' |
    grep -o '"revision":"[0-9]*"' | head -n 1 | grep -o '[0-9]*')
  [ -n "$rev" ] || die "could not read etcd's revision"
  curl -sS --fail -X POST "$url/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
  log "compacted etcd to revision $rev"
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
  *) echo "usage: hack/cluster.sh bin|up|down|status|show|env|compact" >&2; exit 2 ;;
esac

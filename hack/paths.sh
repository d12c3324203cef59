# hack/paths.sh - where the local control plane and its real node keep their
# binaries and state (sourced by hack/cluster.sh, hack/node.sh and
# bench/peer.sh, with $root set to the repository): the pinned versions, the
# cache outside the repository keyed by them, the cluster's directory under
# build/, and how Go is run to build into that cache.
# shellcheck source=versions.env
. "$root/hack/versions.env"
cache=${LUAOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/luaop}
k8s_bin="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
kwok_bin="$cache/kwok-$KWOK_VERSION/bin"
cluster_dir="$root/build/cluster"
# (a link to another tree's, as hack/mutants.sh's scratch copies have: that
# tree's own path, which its processes' command lines name)
if [ -L "$cluster_dir" ]; then cluster_dir=$(readlink -f "$cluster_dir"); fi
kubeconfig="$cluster_dir/kubeconfig"

# The go command: on PATH, else Go's default install; status 1 when neither.
find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [ -x /usr/local/go/bin/go ]; then
    echo /usr/local/go/bin/go
  else
    return 1
  fi
}

# go_env COMMAND...: COMMAND with Go's caches beside the binaries, outside
# the repository.
go_env() {
  env GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-buildvcs=false GOTOOLCHAIN=auto "$@"
}

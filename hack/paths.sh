# hack/paths.sh - where the local control plane and its real node keep their
# binaries and state (sourced by hack/cluster.sh and hack/node.sh, with
# $root set to the repository): the pinned versions, the cache outside the
# repository keyed by them, and the cluster's directory under build/.
# shellcheck source=versions.env
. "$root/hack/versions.env"
cache=${LUAOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/luaop}
k8s_bin="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
kwok_bin="$cache/kwok-$KWOK_VERSION/bin"
cluster_dir="$root/build/cluster"
kubeconfig="$cluster_dir/kubeconfig"

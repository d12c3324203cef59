#!/usr/bin/env bash
# A real node beside the local control plane: a kubelet and kube-proxy (from
# the same Kubernetes release and Go build as the API server), Debian's
# containerd, runc and CNI plugins. hack/cluster.sh runs it; on its own:
#
#   hack/node.sh supported   exit 0 when this machine can run the node (root,
#                            cgroup v1, the tools), else say why
#   hack/node.sh check       refuse (exit 1, saying why) where the node would
#                            collide with what the machine runs or has
#   hack/node.sh up          start the node; it registers as luaop-node,
#                            Ready, tainted luaop.dev/real-node:NoSchedule
#   hack/node.sh down        stop it and remove exactly what `up` created
#   hack/node.sh import IMG  put buildah's image IMG into the node's image
#                            store (no registry), under the same name
#   hack/node.sh ctr ARGS    ctr against the node's containerd (namespace
#                            k8s.io)
#   hack/node.sh exec ARGS   run ARGS in the node's network namespace
#
# Where it lives. The node has a network namespace of its own (luaop-node),
# joined to the machine by one veth pair, 10.251.0.1 (machine) and
# 10.251.0.2 (node). Pods get 10.252.0.0/24 on the bridge luaop0 inside it;
# kube-proxy's rules for Services (10.0.0.0/24) are in it too, and the
# machine routes both ranges to it (so the API server reaches a webhook's
# Service as in a cluster). Nothing leaves
# the node but to the API server: Pods reach the API server through the
# `kubernetes` Service exactly as in a cluster (kube-proxy turns 10.0.0.1:443
# into the endpoint the API server advertises, 10.251.0.1:PORT), and on the
# machine one NAT rule of ours hands 10.251.0.1:PORT to the API server on
# 127.0.0.1:PORT, which listens nowhere else. The node's own rules let out
# only that, and answers to connections the machine opened. containerd, kubelet and CNI
# keep their files in build/cluster/node and /run/luaop-node, sockets
# included; the kubelet's cgroups are under /luaop. What `up` creates outside
# those is written to build/cluster/node/created, and `down` undoes that list.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=paths.sh
. "$root/hack/paths.sh"
admin_kubeconfig=$kubeconfig
pki="$cluster_dir/kwok/clusters/luaop/pki"
dir="$cluster_dir/node"
run=/run/luaop-node
created="$dir/created"

node=luaop-node
netns=luaop-node
host_if=luaop-h
node_if=luaop-n
host_ip=10.251.0.1
node_ip=10.251.0.2
link_net=10.251.0.0/30
pod_cidr=10.252.0.0/24
bridge=luaop0
service_cidr=10.0.0.0/24
taint=luaop.dev/real-node
pause_image=luaop.local/pause:1
cni_bin=/usr/lib/cni
# the kernel settings the kubelet (or the CNI bridge) may change; put back by `down`
sysctls="vm.overcommit_memory kernel.panic kernel.panic_on_oops vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
# the directories outside ours that the kubelet and libcni write in any case
outside_dirs="/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd"

log() { printf 'node: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

in_node() { nsenter --net="/run/netns/$netns" -- "$@"; }
kubectl() { "$k8s_bin/kubectl" --kubeconfig "$admin_kubeconfig" "$@"; }
ctr_() { ctr --address "$run/containerd.sock" --namespace k8s.io "$@"; }
record() { printf '%s\n' "$*" >>"$created"; }

# The API server's port, from the admin kubeconfig kwokctl wrote.
apiserver_port() {
  sed -n 's|^ *server: https://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$admin_kubeconfig" | head -n 1
}

# Processes of this node: containerd, the kubelet, kube-proxy and shims all
# carry one of our paths in their command lines.
node_pids() {
  { pgrep -f -- "$run/" || true; pgrep -f -- "$dir/" || true; } | sort -u
}

# Processes in the node's cgroups (containers, whatever their command line).
cgroup_pids() {
  local f
  for f in /sys/fs/cgroup/pids/luaop /sys/fs/cgroup/memory/luaop; do
    [ -d "$f" ] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}

# Whether this machine can run the node at all (else cluster-up goes on
# without it, and spec/incluster is skipped, saying why).
cmd_supported() {
  local why="" p
  [ "$(id -u)" = 0 ] || why+=" it needs root (network namespaces, cgroups, containerd);"
  [ -d /sys/fs/cgroup/pids ] && [ -d /sys/fs/cgroup/memory ] ||
    why+=" it expects cgroup v1 controllers under /sys/fs/cgroup (as the machines it is tested on have; cgroup v2 is not done);"
  for p in containerd ctr runc nsenter ip iptables buildah cc openssl; do
    command -v "$p" >/dev/null || why+=" $p is missing (hack/deps.sh cluster);"
  done
  for p in bridge host-local loopback portmap; do
    [ -x "$cni_bin/$p" ] || why+=" the CNI plugin $cni_bin/$p is missing (hack/deps.sh cluster);"
  done
  if [ -n "$why" ]; then
    log "no real node on this machine:$why"
    return 1
  fi
}

cmd_check() {
  local why="" p
  # A kubelet of someone else's: it owns /var/lib/kubelet/device-plugins and
  # /var/log/containers. A containerd of someone else's may run beside ours
  # (its own socket, root, state; shims and the CNI cache are keyed by
  # address and network name), but not one started on our paths.
  for p in $(pgrep -x kubelet || true); do
    running "$p" || continue # (an exited one holds nothing)
    case "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" in
      *"$dir/"*) ;;
      *) why+=" a kubelet runs on this machine already (pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-80));" ;;
    esac
  done
  [ ! -S /var/lib/kubelet/device-plugins/kubelet.sock ] || [ -f "$created" ] ||
    why+=" another kubelet's /var/lib/kubelet/device-plugins/kubelet.sock exists;"
  if [ -e "/run/netns/$netns" ] && [ ! -f "$created" ]; then
    why+=" a network namespace $netns exists and is not this cluster's;"
  fi
  for p in $host_if $bridge; do
    if ip link show "$p" >/dev/null 2>&1 && [ ! -f "$created" ]; then why+=" a network interface $p exists and is not this cluster's;"; fi
  done
  # address ranges the machine routes elsewhere already
  for p in $link_net $pod_cidr $service_cidr; do
    if ip -4 route show to match "${p%/*}" | grep -v '^default' | grep -qv "dev $host_if"; then
      why+=" $p is already routed on this machine ($(ip -4 route show to match "${p%/*}" | grep -v '^default' | head -n 1));"
    fi
  done
  if [ -n "$why" ]; then
    log "refusing to start a node here:$why"
    log "stop or remove those first (this script never touches what it did not create)"
    return 1
  fi
}

# Client certificates signed by the cluster's CA: the kubelet's as a node
# (the Node authorizer), kube-proxy's as system:kube-proxy (its RBAC binding).
client_cert() {
  local name=$1 subj=$2
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$dir/pki/$name.key" -out "$dir/pki/$name.csr" 2>/dev/null &&
    openssl x509 -req -in "$dir/pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -days 30 -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n') \
      -out "$dir/pki/$name.crt" 2>/dev/null || die "could not make the $name client certificate (openssl)"
  rm -f "$dir/pki/$name.csr"
}

write_kubeconfig() {
  local name=$1 port=$2
  cat >"$dir/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: luaop
  cluster: {server: "https://$host_ip:$port", certificate-authority: "$pki/ca.crt"}
users:
- name: $name
  user: {client-certificate: "$dir/pki/$name.crt", client-key: "$dir/pki/$name.key"}
contexts:
- name: luaop
  context: {cluster: luaop, user: $name}
current-context: luaop
EOF
}

write_configs() {
  mkdir -p "$dir/cni/net.d" "$dir/cni/ipam" "$dir/kubelet" "$dir/pods" "$dir/containerd" "$dir/logs" "$dir/pki"
  cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd"
state = "$run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$run/containerd.sock"
[ttrpc]
  address = "$run/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # without it every sandbox fails here: runc cannot lower oom_score_adj
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$run/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$dir/cni/net.d"
EOF
  cat >"$dir/cni/net.d/10-luaop.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "luaop-node",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
              "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  # ConfigMap volumes follow their ConfigMap within the kubelet's sync period
  # (its default: 1m); 5 s here, LUAOP_NODE_SYNC=default for the default
  local sync="syncFrequency: ${LUAOP_NODE_SYNC:-5s}"
  [ "${LUAOP_NODE_SYNC:-}" != default ] || sync="# syncFrequency: the kubelet's default"
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
containerRuntimeEndpoint: "unix://$run/containerd.sock"
cgroupDriver: cgroupfs
cgroupRoot: /luaop
# the machines here have cgroup v1, which a kubelet from v1.35 on refuses
# unless told otherwise (docs/testing.md, "The real node")
failCgroupV1: false
failSwapOn: false
podCIDR: $pod_cidr
podLogsDir: "$dir/pods"
$sync
registerWithTaints:
- {key: $taint, effect: NoSchedule}
# imported images cannot be pulled again: never collect them; and never
# evict for a full disk of the machine's
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
resolvConf: /etc/resolv.conf
EOF
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$dir/kube-proxy.kubeconfig"}
hostnameOverride: $node
mode: iptables
clusterCIDR: $pod_cidr
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# the machine's conntrack limits and timeouts stay as they are
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# The pause image the sandboxes run, built from hack/node/pause.c once per
# source (cached), as an OCI archive.
pause_archive() {
  local h out tree c
  h=$(sha256sum "$root/hack/node/pause.c" | cut -c1-16)
  out="$cache/node-pause-$h.tar"
  if [ ! -s "$out" ]; then
    tree=$(mktemp -d)
    cc -std=c11 -Wall -Wextra -Werror -Os -static -s -o "$tree/pause" "$root/hack/node/pause.c" ||
      die "could not build the pause program (cc -static; libc6-dev)"
    c=$(buildah --storage-driver=vfs from scratch) &&
      buildah --storage-driver=vfs copy "$c" "$tree/pause" /pause >/dev/null &&
      buildah --storage-driver=vfs config --entrypoint '["/pause"]' --user 65535:65535 "$c" &&
      buildah --storage-driver=vfs commit --quiet --format oci "$c" "oci-archive:$out.tmp:$pause_image" >/dev/null &&
      buildah --storage-driver=vfs rm "$c" >/dev/null || die "could not pack the pause image (buildah)"
    mv "$out.tmp" "$out"
    rm -rf "$tree"
  fi
  echo "$out"
}

wait_for() { # SECONDS COMMAND...
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

start_bg() { # NAME COMMAND... (in the node's network namespace, its own session)
  local name=$1
  shift
  (exec setsid nsenter --net="/run/netns/$netns" -- "$@" </dev/null >>"$dir/logs/$name.log" 2>&1) &
}

cmd_up() {
  [ -x "$k8s_bin/kubelet" ] && [ -x "$k8s_bin/kube-proxy" ] || die "no kubelet in $k8s_bin (hack/cluster.sh bin builds it)"
  [ -f "$admin_kubeconfig" ] || die "the control plane is not up (hack/cluster.sh up)"
  local port start=$SECONDS p v
  port=$(apiserver_port)
  [ -n "$port" ] || die "no https://127.0.0.1:PORT server in $admin_kubeconfig"
  cmd_down quiet
  cmd_supported || exit 1
  cmd_check || exit 1
  mkdir -p "$dir" "$run"
  : >"$created"
  record "dir $run"

  # What the kubelet and the CNI plugins change, to put back.
  for p in $sysctls; do
    v=$(sysctl -n "$p" 2>/dev/null) && record "sysctl $p $v"
  done
  for p in $outside_dirs; do [ -e "$p" ] || record "dir $p"; done
  [ -d /run/netns ] || record "dir /run/netns"
  awk '$5 == "/run/netns"' /proc/self/mountinfo | grep -q . || record "mount /run/netns"

  # The network: the node's namespace and the veth pair; Pods' range and
  # Services' routed to it (the API server, on the machine, calls webhooks
  # through their Service, whose rules kube-proxy keeps in the node; both
  # routes go with the link at down); nothing leaves it but to the
  # machine's end.
  ip netns add "$netns" || die "could not create the network namespace $netns"
  record "netns $netns"
  ip link add "$host_if" type veth peer name "$node_if" netns "$netns" &&
    ip addr add "$host_ip/30" dev "$host_if" && ip link set "$host_if" up &&
    in_node ip addr add "$node_ip/30" dev "$node_if" && in_node ip link set "$node_if" up &&
    in_node ip link set lo up && in_node ip route add default via "$host_ip" &&
    ip route add "$pod_cidr" via "$node_ip" dev "$host_if" &&
    ip route add "$service_cidr" via "$node_ip" dev "$host_if" || die "could not set up the veth pair $host_if/$node_if"
  record "link $host_if"
  in_node sysctl -qw net.ipv4.ip_forward=1
  # Out of the node, only to the API server, and answers to what the
  # machine opened (the API server to the kubelet, the specs to Pods).
  for p in OUTPUT FORWARD; do
    in_node iptables -w -A "$p" -o "$node_if" -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT &&
      in_node iptables -w -A "$p" -o "$node_if" -d "$host_ip" -p tcp --dport "$port" -j ACCEPT &&
      in_node iptables -w -A "$p" -o "$node_if" -j DROP ||
      die "could not confine the node's traffic (iptables in $netns)"
  done
  # 10.251.0.1:PORT (the API server's advertised endpoint) is the API server
  # on loopback, for traffic from the node only
  sysctl -qw "net.ipv4.conf.$host_if.route_localnet=1"
  iptables -w -t nat -N LUAOP-NODE && record "chain nat LUAOP-NODE" &&
    iptables -w -t nat -A LUAOP-NODE -d "$host_ip" -p tcp --dport "$port" -j DNAT --to-destination "127.0.0.1:$port" &&
    iptables -w -t nat -I PREROUTING -i "$host_if" -j LUAOP-NODE && record "rule nat PREROUTING -i $host_if -j LUAOP-NODE" ||
    die "could not add the NAT rule to the API server (iptables -t nat)"

  # cgroups for the kubelet's Pods
  for p in /sys/fs/cgroup/*/; do
    [ "$p" = /sys/fs/cgroup/unified/ ] && continue
    mkdir -p "$p/luaop" || die "could not create the cgroup ${p}luaop"
    if [ -f "$p/cpuset.cpus" ]; then
      cat "$p/cpuset.cpus" >"$p/luaop/cpuset.cpus" && cat "$p/cpuset.mems" >"$p/luaop/cpuset.mems"
    fi
  done
  record "cgroup /luaop"

  write_configs
  client_cert kubelet "/O=system:nodes/CN=system:node:$node"
  client_cert kube-proxy "/CN=system:kube-proxy"
  write_kubeconfig kubelet "$port"
  write_kubeconfig kube-proxy "$port"

  start_bg containerd containerd --config "$dir/containerd.toml"
  wait_for 30 ctr_ version || die "containerd did not answer within 30 s; see build/cluster/node/logs/containerd.log"
  ctr_ images import --no-unpack=false "$(pause_archive)" >/dev/null ||
    die "could not import the pause image into the node's containerd"

  start_bg kubelet "$k8s_bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/pki/kubelet-serving" --node-ip "$node_ip" \
    --hostname-override "$node" --node-labels "$taint=true" --v 1
  start_bg kube-proxy "$k8s_bin/kube-proxy" --config "$dir/kube-proxy.yaml" --v 1
  wait_for 60 kubectl wait --for=condition=Ready "node/$node" --timeout=1s ||
    die "the node did not become Ready within 60 s; see build/cluster/node/logs/"
  record "node $node"
  log "node $node Ready in $((SECONDS - start)) s (containerd $(containerd --version | awk '{print $3}'), kubelet $KUBE_VERSION)"
}

# Unmount everything under a directory, deepest first.
unmount_under() {
  local m
  for m in $(awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

# Whether a process runs (exited ones wait as zombies until init reaps them).
running() {
  [ -e "/proc/$1" ] && [ "$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

stop_pids() { # PID... : TERM, then KILL whatever still runs after 10 s
  local p i alive
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null || true
  for i in $(seq 1 50); do
    alive=""
    for p in "$@"; do running "$p" && alive+=" $p"; done
    [ -n "$alive" ] || return 0
    sleep 0.2
  done
  kill -9 $alive 2>/dev/null || true
}

# A directory `up` found missing and recorded: ours entirely, or shared
# with whatever else may have started using it since (a containerd, a
# kubelet, another CNI user). There only the files the node leaves are
# removed, then the directories left empty; anything else stays, said.
remove_dir() {
  local d=$1
  [ -e "$d" ] || return 0
  unmount_under "$d"
  case $d in
    "$run" | /run/netns) rm -rf "$d"; return 0 ;;
    /var/lib/kubelet) rm -f "$d/device-plugins/kubelet.sock" "$d/device-plugins/kubelet_internal_checkpoint" ;;
    /var/lib/cni) rm -rf "$d"/results/luaop-node-* "$d"/networks/luaop-node ;;
    /var/log/containers) find "$d" -maxdepth 1 -name "luaop-*_luaop-system_*" -delete 2>/dev/null ;;
    /var/log/pods) rm -rf "$d"/luaop-system_luaop-* ;;
    /run/containerd) find "$d/s" -maxdepth 1 -type s -delete 2>/dev/null ;;
  esac
  find "$d" -depth -type d -empty -delete 2>/dev/null || true
  [ ! -e "$d" ] || log "left $d as it is: something else uses it now ($(ls -A "$d" | head -n 3 | tr '\n' ' '))"
}

cmd_down() {
  local quiet=${1:-} line kind a b c p
  if [ ! -f "$created" ] && [ -z "$(node_pids)" ] && [ ! -d "$dir" ]; then
    return 0
  fi
  # the node's Pods first, while the kubelet runs (volumes and sandboxes are
  # torn down by their owners), briefly
  if [ -f "$admin_kubeconfig" ] && [ -n "$(node_pids)" ] && kubectl get node "$node" >/dev/null 2>&1; then
    kubectl delete pods --all-namespaces --field-selector "spec.nodeName=$node" --grace-period=1 \
      --timeout=20s >/dev/null 2>&1 || true
  fi
  # kube-proxy and the kubelet, then the containers, then containerd and shims
  for p in kube-proxy kubelet; do
    stop_pids $(pgrep -f -- "--config $dir/$p.yaml" || true)
  done
  if [ -S "$run/containerd.sock" ]; then
    for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  # whatever still runs in the node's cgroups or with our paths
  stop_pids $(cgroup_pids)
  stop_pids $(node_pids)
  unmount_under "$run"
  unmount_under "$dir"
  if [ -f "$created" ]; then
    # undo in reverse order
    while read -r kind a b c; do
      case $kind in
        node) [ -f "$admin_kubeconfig" ] && kubectl delete node "$a" --wait=false >/dev/null 2>&1 || true ;;
        rule) iptables -w -t "$a" -D "$b" $c 2>/dev/null || true ;;
        chain) iptables -w -t "$a" -F "$b" 2>/dev/null; iptables -w -t "$a" -X "$b" 2>/dev/null || true ;;
        link) ip link del "$a" 2>/dev/null || true ;;
        netns) ip netns del "$a" 2>/dev/null || true ;;
        cgroup)
          for p in /sys/fs/cgroup/*/; do
            [ -d "$p${a#/}" ] && find "$p${a#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
          done
          ;;
        sysctl) [ "$(sysctl -n "$a" 2>/dev/null)" = "$b" ] || sysctl -qw "$a=$b" 2>/dev/null || log "could not restore $a to $b" ;;
        mount) umount "$a" 2>/dev/null || true ;;
        dir) remove_dir "$a" ;;
      esac
    done < <(tac "$created")
  fi
  rm -rf "$dir"
  [ -n "$quiet" ] || log "down"
}

cmd_import() {
  local img=${1:?image} tar
  [ -S "$run/containerd.sock" ] || die "the node is not up (make cluster-up)"
  tar=$(mktemp "$cluster_dir/image.XXXXXX.tar")
  rm -f "$tar"
  buildah --storage-driver=vfs push --quiet "$img" "docker-archive:$tar:$img" >/dev/null ||
    die "could not export $img from buildah's storage"
  ctr_ images import "$tar" >/dev/null || die "could not import $img into the node's containerd"
  rm -f "$tar"
}

case "${1:-}" in
  supported) cmd_supported ;;
  check) cmd_check ;;
  up) cmd_up ;;
  down) cmd_down "${2:-}" ;;
  import) shift; cmd_import "$@" ;;
  ctr) shift; ctr_ "$@" ;;
  exec) shift; in_node "$@" ;;
  *) echo "usage: hack/node.sh supported|check|up|down|import IMAGE|ctr ARGS|exec ARGS" >&2; exit 2 ;;
esac

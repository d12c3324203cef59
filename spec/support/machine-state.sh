#!/usr/bin/env bash
# spec/support/machine-state.sh - what the local control plane and its real
# node could leave behind on the machine, one fact per line, in a stable
# order: spec/run.sh compares it before `cluster up` and after `cluster down`.
# Counters and the order of listings are left out; what it lists is ours or
# what ours could change.
set -uo pipefail
echo "## mounts"
awk '{ print $5, $9 }' /proc/self/mountinfo | LC_ALL=C sort
echo "## links"
ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | LC_ALL=C sort
echo "## network namespaces"
ip netns list 2>/dev/null | LC_ALL=C sort
echo "## routes"
ip -4 route show | LC_ALL=C sort
# A table with no rule, no chain of its own and every policy ACCEPT is as
# good as none: it is left out (the kernel keeps a table once something
# used it, as the node's NAT rule does on a machine that had none).
for t in iptables ip6tables; do
  echo "## $t"
  "$t-save" 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' |
    awk '/^\*/ { buf = $0; used = 0; next }
         /^COMMIT/ { if (used) print buf "\n" $0; next }
         { buf = buf "\n" $0; if ($0 ~ /^-A / || $0 ~ /^:[^ ]+ (DROP|-)/) used = 1 }' | LC_ALL=C sort
done
echo "## processes"
ps -eo comm= | grep -E '^(kubelet|kube-proxy|containerd|containerd-shim.*|runc|pause|luaop|etcd|kube-apiserver|kube-controller|kube-scheduler|kwok)$' | LC_ALL=C sort
echo "## cgroups"
ls -d /sys/fs/cgroup/*/luaop /sys/fs/cgroup/*/kubepods 2>/dev/null
echo "## files"
ls -d /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /run/luaop-node /run/netns 2>/dev/null
echo "## kernel settings"
sysctl vm.overcommit_memory kernel.panic kernel.panic_on_oops vm.panic_on_oom kernel.keys.root_maxkeys \
  kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.route_localnet net.netfilter.nf_conntrack_max \
  net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait 2>/dev/null
exit 0

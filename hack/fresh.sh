#!/usr/bin/env bash
# hack/fresh.sh [COMMAND...] - run COMMAND (default: bash .ci/run) in a clean
# clone of this repository's HEAD, inside a fresh Debian bookworm root: the
# test of the fresh-machine path that this machine, which keeps whatever
# earlier runs installed, cannot give.
#
# The root is buildah's debian:bookworm-slim (hack/image.sh makes it from
# debootstrap once), with nothing added but the clone in /src, Go in
# /usr/local/go (the machine's; Go builds the control plane, and a fresh
# machine here has it), the machine's resolv.conf and its local trust
# anchors (/usr/local/share/ca-certificates). COMMAND runs as root
# in a mount namespace of its own whose root is that tree (pivot_root, so
# that runc inside can pivot too), with /proc, /sys, /dev, and a fresh /run
# and /tmp; it shares the machine's network (apt and the Go module proxy),
# kernel and cgroups, so the machine's own local control plane must be down
# (`make cluster-down`). Its cache ($LUAOP_CACHE) starts empty.
#
# FRESH_SCRIPT=FILE copies FILE in as /src/fresh-script.sh (to run a part
# of the suite: `FRESH_SCRIPT=x.sh hack/fresh.sh bash fresh-script.sh`).
# Output goes to build/fresh/log as well; the root is removed afterwards
# (KEEP=1 keeps it and prints where). Exits with COMMAND's status.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf 'fresh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
b() { buildah --storage-driver=vfs "$@"; }

[ "$(id -u)" = 0 ] || die "needs root (a mount namespace, buildah's storage)"
(($#)) || set -- bash .ci/run
if hack/cluster.sh status >/dev/null 2>&1 || ip link show luaop-h >/dev/null 2>&1; then
  die "the machine's local control plane or real node is up; run 'make cluster-down' first (the fresh root shares the network and cgroups)"
fi
b inspect --type image debian:bookworm-slim >/dev/null 2>&1 ||
  die "no debian:bookworm-slim in buildah's storage yet; 'make image' makes it from debootstrap"
[ -x /usr/local/go/bin/go ] || die "no Go in /usr/local/go to copy in"

mkdir -p build/fresh
c=$(b from --pull=never debian:bookworm-slim)
tree=$(b mount "$c")
cleanup() {
  if [ -n "${KEEP:-}" ]; then
    log "kept: $tree (buildah container $c; remove with: buildah --storage-driver=vfs rm $c)"
  else
    b rm "$c" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
git clone -q "$root" "$tree/src"
# FRESH_SCRIPT=FILE: a script of one's own, put in as /src/fresh-script.sh
if [ -n "${FRESH_SCRIPT:-}" ]; then cp "$FRESH_SCRIPT" "$tree/src/fresh-script.sh"; fi
cp -a /usr/local/go "$tree/usr/local/go"
cp /etc/resolv.conf "$tree/etc/resolv.conf"
# the machine's own trust anchors, as it has its network: Debian's
# ca-certificates (which hack/deps.sh installs) adds them to the bundle
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$tree/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$tree/usr/local/share/ca-certificates/"
fi
log "root $tree: a clone of $(git rev-parse --short HEAD) in /src; running: $*"

start=$SECONDS
set +e
unshare --mount --propagation private -- bash -c '
  set -e
  r=$1; shift
  mount --bind "$r" "$r"
  mount -t proc proc "$r/proc"
  mount --rbind /sys "$r/sys"
  mount --rbind /dev "$r/dev"
  mount -t tmpfs -o mode=755 tmpfs "$r/run"
  mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
  mkdir -p "$r/.old"
  cd "$r"
  pivot_root . .old
  umount -l /.old
  rmdir /.old
  cd /src
  exec env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI=true \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin "$@"
' fresh "$tree" "$@" 2>&1 | tee build/fresh/log
rc=${PIPESTATUS[0]}
set -e
log "exit $rc after $((SECONDS - start)) s (the whole output: build/fresh/log)"
exit "$rc"

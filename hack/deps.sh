#!/usr/bin/env bash
# hack/deps.sh [SET...] - install the Debian packages of the named sets, only
# those that are missing. No SET means all of them.
#
#   build    what `make` needs: a C toolchain, Lua 5.4, libyaml, libuv,
#            libcurl, nghttp2, zlib, and dpkg-dev and perl for the lean static
#            libcurl and OpenSSL (and libmicrohttpd and libevent, built
#            against it) that hack/libs.sh builds from source packages; no
#            libssl-dev: the builds that link Debian's libssl3 take luaop's
#            own OpenSSL headers (Makefile)
#   test     what `make test` adds: busted, luacheck (lua-check, over the
#            tree's Lua), valgrind, clang and libclang-rt (the fuzz
#            harnesses), python3 (the fake API server), openssl (test
#            certificates), curl, prometheus (promtool checks /metrics; its
#            server scrapes luaop in an e2e spec), iproute2 (ss: what a
#            luaop listens on), git (hack/mutants.sh applies its patches
#            with git apply)
#   cluster  what the local control plane needs: curl, procps; for its real
#            node containerd, runc, the CNI plugins, iptables, iproute2,
#            openssl (its certificates) and buildah (its pause image); and Go
#            1.26 or newer (Kubernetes v1.37 needs it), which Debian bookworm does not ship (checked, not
#            installed). Debian's containerd is installed, not started: the
#            node runs its own on private paths (hack/node.sh)
#   image    what `make image` and spec/image need: buildah, runc, debootstrap;
#            dnsmasq-base (a DNS server for the image spec's host name)
#   bench    what bench/ adds: bc, gdb, time (peak RSS), gnuplot-nox (its charts)
#
# The only change to the system's package setup is `apt-get update` and
# `apt-get install` of what is missing, both printed before they run. The
# Dockerfile's builder stage installs through `hack/deps.sh build` too.
set -euo pipefail

log() { printf 'deps: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

declare -A set_pkgs=(
  [build]="build-essential pkg-config ca-certificates lua5.4 libyaml-dev libuv1-dev
           libcurl4-openssl-dev libnghttp2-dev zlib1g-dev dpkg-dev perl"
  [test]="lua-busted lua-check valgrind python3 openssl curl clang libclang-rt-14-dev prometheus iproute2 git"
  [cluster]="curl procps containerd runc containernetworking-plugins iptables iproute2 openssl buildah"
  [image]="buildah runc debootstrap dnsmasq-base"
  [bench]="bc gdb time gnuplot-nox"
)
all_sets=(build test cluster image bench)

sets=("$@")
((${#sets[@]})) || sets=("${all_sets[@]}")
for s in "${sets[@]}"; do
  [ -n "${set_pkgs[$s]:-}" ] || die "unknown set '$s'; the sets are: ${all_sets[*]}"
done

command -v dpkg-query >/dev/null && command -v apt-get >/dev/null ||
  die "this machine has no dpkg and apt: luaop's scripts expect Debian bookworm (elsewhere, install the packages listed at the top of hack/deps.sh by other means)"

wanted=()
for s in "${sets[@]}"; do
  for p in ${set_pkgs[$s]}; do wanted+=("$p"); done
done

installed() {
  local status
  status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
  [ "$status" = "install ok installed" ]
}

missing=()
for p in "${wanted[@]}"; do
  installed "$p" || case " ${missing[*]} " in *" $p "*) ;; *) missing+=("$p") ;; esac
done

if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "missing ${missing[*]}; install them as root (apt-get install ${missing[*]}), or install sudo"
    sudo="sudo"
  fi
  log "${sets[*]}: missing ${missing[*]}"
  log "running: ${sudo:+sudo }apt-get update (refreshes the system's package lists)"
  $sudo apt-get update -q ||
    die "apt-get update failed (see above): check the network to the package mirror and /etc/apt/sources.list*"
  log "running: ${sudo:+sudo }apt-get install --no-install-recommends ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "apt-get install failed (see above): ${missing[*]}"
else
  log "${sets[*]}: the Debian packages are present"
fi

# Go builds the control plane (never the product); Debian's is too old.
case " ${sets[*]} " in
  *" cluster "*)
    go=$(command -v go || true)
    [ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
    [ -n "$go" ] ||
      die "Go 1.26 or newer builds the local control plane and is not installed: unpack Go's release into /usr/local/go (or put go on PATH)"
    v=$("$go" env GOVERSION 2>/dev/null) || die "$go does not run ('$go env GOVERSION' failed)"
    minor=$(printf '%s\n' "$v" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
    [ -n "$minor" ] && [ "$minor" -ge 26 ] ||
      die "$go is $v; the control plane needs Go 1.26 or newer"
    ;;
esac
exit 0

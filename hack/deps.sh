#!/usr/bin/env bash
# Install the Debian packages luaop needs to build, test and run the local
# control plane. Idempotent: installs only what is missing.
set -euo pipefail

pkgs=(
  build-essential pkg-config ca-certificates git openssl python3 curl bc
  lua5.4 liblua5.4-dev
  libyaml-dev libcurl4-openssl-dev libuv1-dev
  dpkg-dev perl libnghttp2-dev zlib1g-dev
  lua-busted valgrind
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "deps: Debian packages present"
fi

# Go builds the control plane (never the product). Debian's Go is too old for
# Kubernetes; the toolchain is expected at /usr/local/go or on PATH.
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "deps: Go 1.24 or newer is needed to build the local control plane; install it into /usr/local/go" >&2
  exit 1
fi

#!/usr/bin/env bash
# hack/image.sh [NAME] - build luaop's image (Dockerfile) with buildah, as
# root, with no Docker engine: storage driver vfs, chroot isolation.
#
# The Dockerfile starts FROM debian:bookworm-slim. No registry is used:
# when that image is not in buildah's storage yet, it is made here from a
# `debootstrap --variant=minbase bookworm` tree (Debian's default mirror)
# and committed under that name, once; buildah then never pulls.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
name=${1:-luaop:latest}
base=debian:bookworm-slim
b() { buildah --storage-driver=vfs "$@"; }
log() { printf 'image: %s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || { log "buildah and debootstrap need root here"; exit 1; }
missing=
command -v buildah >/dev/null || missing="$missing buildah"
command -v debootstrap >/dev/null || missing="$missing debootstrap"
if [ -n "$missing" ]; then
  log "installing$missing"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

if ! b inspect --type image "$base" >/dev/null 2>&1; then
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  log "making $base from debootstrap --variant=minbase bookworm (once)"
  debootstrap --variant=minbase bookworm "$tree" >/dev/null
  rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
  # slim, as Debian's slim images are: no manuals, docs or translations
  # (copyright files stay), and dpkg leaves them out of later installs too
  cat >"$tree/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
CFG
  find "$tree/usr/share/doc" -type f ! -name copyright -delete
  rm -rf "$tree"/usr/share/{man,info,locale,lintian}/*
  c=$(b from scratch)
  b copy "$c" "$tree" / >/dev/null
  b config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  b commit --quiet "$c" "$base" >/dev/null
  b rm "$c" >/dev/null
fi

log "building $name"
b bud --pull=never --isolation=chroot --layers=false -t "$name" -f Dockerfile . >&2
size=$(b inspect --type image --format '{{.Size}}' "$name" 2>/dev/null || true)
b images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E "luaop|bookworm" >&2 || true
echo "$name"

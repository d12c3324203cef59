#!/usr/bin/env bash
# hack/image.sh [NAME] - build luaop's image (Dockerfile) with buildah, as
# root, with no Docker engine: storage driver vfs, chroot isolation.
#
# The image is tagged luaop:src-HASH too, HASH covering every file the build
# reads (the Dockerfile, what it copies, this script); when an image of that
# tag is in buildah's storage already, it is only tagged NAME again, so an
# unchanged tree is never rebuilt. Older luaop:src-* images are removed.
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

die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "building the image needs root here (buildah's vfs storage and debootstrap)"
hack/deps.sh image || die "could not install buildah, runc and debootstrap (hack/deps.sh image)"

# what the build reads: the Dockerfile, the files it copies, this script
hash=$(find Dockerfile .dockerignore Makefile hack/deps.sh hack/embed.lua hack/libs.sh hack/lua hack/image.sh hack/rootfs.sh \
  src lua operators -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16) ||
  die "could not hash the image's inputs"
tag="luaop:src-$hash"
if b inspect --type image "$tag" >/dev/null 2>&1; then
  b tag "$tag" "$name" || die "could not tag $tag as $name"
  log "$name is $tag, built before from the same sources"
  echo "$name"
  exit 0
fi

if ! b inspect --type image "$base" >/dev/null 2>&1; then
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  log "making $base from debootstrap --variant=minbase bookworm (once)"
  debootstrap --variant=minbase bookworm "$tree" >"$tree.log" 2>&1 ||
    { tail -n 20 "$tree.log" >&2; die "debootstrap of Debian bookworm failed (above; all of it in $tree.log): check the network to Debian's mirror"; }
  rm -f "$tree.log"
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
  { c=$(b from scratch) &&
    b copy "$c" "$tree" / >/dev/null &&
    b config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c" &&
    b commit --quiet "$c" "$base" >/dev/null &&
    b rm "$c" >/dev/null; } || die "could not commit the debootstrap tree as $base (buildah's output above)"
  rm -rf "$tree"
  trap - EXIT
fi

log "building $name ($tag)"
start=$SECONDS
b bud --pull=never --isolation=chroot --layers=false -t "$tag" -f Dockerfile . >&2 ||
  die "the image did not build (buildah's output above)"
b tag "$tag" "$name" || die "could not tag $tag as $name"
# earlier builds of other sources
for old in $(b images --format '{{.Name}}:{{.Tag}}' | sed -n 's|^\(localhost/\)\{0,1\}\(luaop:src-.*\)|\2|p'); do
  [ "$old" = "$tag" ] || b rmi "$old" >/dev/null 2>&1 || true
done
log "built $name ($tag) in $((SECONDS - start)) s"
b images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E "luaop|bookworm" >&2 || true
echo "$name"

#!/usr/bin/env bash
# hack/rootfs.sh BINARY DEST - lay out the image's root filesystem in DEST
# (the Dockerfile's builder stage runs it; the image is FROM scratch with
# DEST as its only layer):
#
#   /usr/local/bin/luaop                       BINARY
#   the shared libraries BINARY loads          as ldd lists them (libc, libm and
#                                              the loader: all else is static)
#   /etc/ssl/certs/ca-certificates.crt         Debian's CA bundle (libcurl's
#                                              default, for servers no
#                                              kubeconfig CA names)
#   /etc/passwd, /etc/group                    root and nonroot (65532)
#   /etc/nsswitch.conf                         hosts: files dns (glibc 2.36
#                                              has both in libc itself)
#   /etc/hosts                                 localhost (a Pod's is mounted)
#   /usr/share/luaop/operators/*.lua           the example operators
#   /usr/share/doc/PKG/copyright               of the Debian packages shipped
#                                              or linked in
#
# No shell, no other program: nothing runs in the image but luaop.
set -euo pipefail
bin=$1 dest=$2
die() { printf 'rootfs: %s\n' "$*" >&2; exit 1; }
[ -x "$bin" ] || die "no binary at $bin"
[ ! -e "$dest" ] || die "$dest exists already"

install -d -m 755 "$dest"/usr/local/bin "$dest"/etc/ssl/certs "$dest"/usr/share/luaop/operators \
  "$dest"/usr/share/doc "$dest"/home/nonroot
install -m 755 "$bin" "$dest"/usr/local/bin/luaop

# the libraries the dynamic loader maps (ldd prints their paths and the
# loader's own), at the same paths
libs=$(ldd "$bin" | grep -o '/[^ ]*') || die "ldd $bin failed"
[ -n "$libs" ] || die "ldd found no libraries: a static binary needs no hack/rootfs.sh libraries, but check"
for lib in $libs; do
  cp -L --parents "$lib" "$dest"/ || die "could not copy $lib"
done

cp /etc/ssl/certs/ca-certificates.crt "$dest"/etc/ssl/certs/ ||
  die "no CA bundle: hack/deps.sh build installs ca-certificates"

printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$dest"/etc/passwd
printf 'root:x:0:\nnonroot:x:65532:\n' >"$dest"/etc/group
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$dest"/etc/nsswitch.conf
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$dest"/etc/hosts
chown 65532:65532 "$dest"/home/nonroot

cp operators/*.lua "$dest"/usr/share/luaop/operators/ || die "no operators/*.lua here"

# copyright notices: libc (shipped), the CA bundle, and the libraries
# linked in statically (Lua, OpenSSL and libcurl: hack/libs.sh builds them from
# these packages' sources)
for pkg in libc6 ca-certificates libssl3 libcurl4-openssl-dev libnghttp2-dev zlib1g-dev libuv1-dev \
  libyaml-dev lua5.4; do
  f=/usr/share/doc/$pkg/copyright
  [ -f "$f" ] || continue
  install -d "$dest/usr/share/doc/$pkg" && cp -L "$f" "$dest/usr/share/doc/$pkg/"
done

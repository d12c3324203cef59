#!/usr/bin/env bash
# hack/libs.sh DIR [STAMP]: luaop's HTTP and TLS stack, built lean and
# static, linked at DIR (make uses build/libs; STAMP is touched when that
# link changes). make runs it every time: when the cache has what apt
# offers, it only checks the link.
#
# Debian's libcurl links some 25 libraries luaop never calls (LDAP, RTMP,
# SSH, Kerberos, SASL, GnuTLS, IDN, PSL, brotli, zstd) and its libcrypto
# carries every algorithm OpenSSL has; mapped, they were 11 MiB of an idle
# luaop's 13 MiB. This builds, from Debian's own source packages (its
# patches applied):
#   OpenSSL   static, TLS 1.2 and 1.3 only, without legacy, deprecated and
#             unused algorithms, engines, modules and config autoloading;
#   libcurl   static, HTTP and HTTPS only, with OpenSSL, nghttp2 and zlib.
# Both go to a cache outside the repository, keyed by the source versions
# apt offers and by this script: ${LUAOP_CACHE:-${XDG_CACHE_HOME:-~/.cache}/luaop}/libs-KEY/
# (VERSIONS there names what was built), so a warm machine only makes the link. Needs deb-src entries for apt (they
# are added, mirroring the deb entries, when missing) and root or sudo for
# that; a cold build takes about two minutes on two cores.
set -euo pipefail

out=${1:?usage: hack/libs.sh DIR [STAMP]}
stamp=${2:-}
cache=${LUAOP_CACHE:-${XDG_CACHE_HOME:-${HOME:?}/.cache}/luaop}
case $cache in /*) ;; *) cache="$PWD/$cache" ;; esac
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
command -v apt-get >/dev/null || { echo "libs: this needs Debian's apt (source packages)" >&2; exit 1; }

# The source packages' versions, newest first.
versions() { apt-cache showsrc "$1" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -Vru; }

curl_vs=$(versions curl)
# apt's lists may just be missing (a container that deleted them)
[ -n "$curl_vs" ] || { $sudo apt-get update -q >/dev/null || true; curl_vs=$(versions curl); }
if [ -z "$curl_vs" ]; then
  echo "libs: adding deb-src entries for apt (the same archives as the deb ones)"
  tmp=$(mktemp)
  for f in /etc/apt/sources.list.d/*.sources; do
    case $f in */luaop-deb-src.sources | *"/*.sources") continue ;; esac
    [ -e "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >>"$tmp" && echo >>"$tmp"
  done
  [ -s "$tmp" ] && $sudo install -m 644 "$tmp" /etc/apt/sources.list.d/luaop-deb-src.sources
  : >"$tmp"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    case $f in */luaop-deb-src.list) continue ;; esac
    [ -e "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >>"$tmp"
  done
  [ -s "$tmp" ] && $sudo install -m 644 "$tmp" /etc/apt/sources.list.d/luaop-deb-src.list
  rm -f "$tmp"
  $sudo apt-get update -q >/dev/null
  curl_vs=$(versions curl)
  [ -n "$curl_vs" ] || { echo "libs: apt has no source packages (deb-src)" >&2; exit 1; }
fi

# The key: the machine, the source versions apt offers, and this script.
ssl_vs=$(versions openssl)
key=$( (uname -m; echo "$curl_vs"; echo "$ssl_vs"; cat "$0") | sha256sum | cut -c1-16)
dir="$cache/libs-$key"

if [ ! -e "$dir/lib/libcurl.a" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # fetch NAME VERSIONS: the newest version of source package NAME that downloads
  # (a security update's source can lag behind its binaries), unpacked with
  # Debian's patches into $work/NAME
  fetch() {
    local v
    for v in $2; do
      if (cd "$work" && apt-get source --download-only -q "$1=$v" >/dev/null 2>&1); then
        (cd "$work" && dpkg-source -x "$1"_*.dsc "$1" >"$work/$1.unpack.log" 2>&1) ||
          { cat "$work/$1.unpack.log" >&2; return 1; }
        echo "$1 $v" >>"$work/VERSIONS"
        echo "libs: building $1 $v"
        return 0
      fi
      rm -f "$work/$1"_*
    done
    echo "libs: could not download the source of $1" >&2
    return 1
  }
  fetch openssl "$ssl_vs"
  fetch curl "$curl_vs"
  stage="$dir.tmp.$$"
  rm -rf "$stage"
  jobs=$(nproc)
  flags="-O2 -ffunction-sections -fdata-sections"
  (
    cd "$work/openssl"
    ./config --prefix="$stage" --libdir=lib --openssldir=/usr/lib/ssl \
      no-shared no-module no-legacy no-engine no-deprecated no-comp no-autoload-config \
      no-ssl3 no-tls1 no-tls1_1 no-dtls no-srp no-psk no-sctp no-srtp no-nextprotoneg no-ssl-trace \
      no-cms no-ts no-ct no-ocsp no-cmp no-rfc3779 no-async no-ui-console no-dgram no-multiblock \
      no-gost no-idea no-des no-rc2 no-rc4 no-rc5 no-md4 no-mdc2 no-whirlpool no-rmd160 no-seed \
      no-camellia no-aria no-bf no-cast no-sm2 no-sm3 no-sm4 no-siphash no-blake2 no-scrypt no-ocb \
      no-dsa no-ec2m no-padlockeng no-afalgeng no-tests $flags >"$work/openssl.log" 2>&1
    make -j"$jobs" build_libs >>"$work/openssl.log" 2>&1
    make install_dev >>"$work/openssl.log" 2>&1
  ) || { tail -n 30 "$work/openssl.log" >&2; echo "libs: OpenSSL did not build" >&2; exit 1; }
  (
    cd "$work/curl"
    PKG_CONFIG_PATH="$stage/lib/pkgconfig" ./configure --prefix="$stage" \
      --disable-shared --enable-static --with-pic --with-openssl="$stage" --with-nghttp2 --with-zlib \
      --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
      --without-libpsl --without-brotli --without-zstd --without-libidn2 --without-librtmp \
      --without-libgsasl --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp \
      --disable-dict --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb \
      --disable-smtp --disable-gopher --disable-mqtt --disable-manual --disable-ntlm --disable-ntlm-wb \
      --disable-tls-srp --disable-cookies --disable-mime --disable-netrc --disable-progress-meter \
      --disable-alt-svc --disable-hsts --disable-websockets --disable-doh --disable-crypto-auth \
      --disable-unix-sockets --disable-libcurl-option --disable-get-easy-options \
      --disable-openssl-auto-load-config CFLAGS="$flags" >"$work/curl.log" 2>&1
    make -j"$jobs" -C lib >>"$work/curl.log" 2>&1
    make -C lib install >>"$work/curl.log" 2>&1
    make -C include install >>"$work/curl.log" 2>&1
  ) || { tail -n 30 "$work/curl.log" >&2; echo "libs: libcurl did not build" >&2; exit 1; }
  cp "$work/VERSIONS" "$stage/"
  rm -rf "$dir"
  mv "$stage" "$dir"
fi

mkdir -p "$(dirname "$out")"
# the stamp (make's) changes only when the link does, so luaop relinks then
if [ "$(readlink "$out" 2>/dev/null)" != "$dir" ] || { [ -n "$stamp" ] && [ ! -e "$stamp" ]; }; then
  ln -sfn "$dir" "$out"
  [ -z "$stamp" ] || touch "$stamp"
fi
echo "libs: $out -> $dir ($(paste -sd, "$dir/VERSIONS" | sed 's/,/, /'))"

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
#   libcurl   static, HTTP and HTTPS only, with OpenSSL, nghttp2 and zlib;
#   libmicrohttpd  static, plain HTTP with epoll: the metrics and health
#             probe server (src/serve.c);
#   libevent  static, its core, evhttp and OpenSSL bufferevents built
#             against the OpenSSL above (Debian's links the system's
#             libssl3: two OpenSSLs in one binary), no thread support: the
#             webhook's HTTPS server (src/tlsserve.c);
#   lua/      Lua's sources, which make compiles into luaop and into the
#             interpreter the specs run on: Lua 5.4.7 from Debian's next
#             stable suite (LUA_SUITE: bookworm's 5.4.4 has bugs a script
#             can crash it with, docs/security.md), with the later
#             upstream fixes in hack/lua/*.patch (each a commit of Lua's own
#             repository, after 5.4.7); and lstrpat.c, lstrlib.c
#             with one line added to its pattern matcher, LUAOP_MATCH_STEP,
#             so that matching is charged to the budget of the task that
#             runs it (src/pattern.h).
# All go to a cache outside the repository, keyed by the source versions
# apt offers and by this script: ${LUAOP_CACHE:-${XDG_CACHE_HOME:-~/.cache}/luaop}/libs-KEY/
# (VERSIONS there names what was built), so a warm machine only makes the link.
# The source packages come through a private apt configuration in the same
# cache (apt/: source entries derived from the machine's deb entries, its own
# lists, refreshed weekly; apt-lua/: the same for LUA_SUITE, Lua only); /etc/apt and the system's lists are left as they
# are, and neither root nor sudo is needed. A cold build takes about three
# minutes on two cores (libevent some 20 s of it).
set -euo pipefail

out=${1:?usage: hack/libs.sh DIR [STAMP]}
stamp=${2:-}
cache=${LUAOP_CACHE:-${XDG_CACHE_HOME:-${HOME:?}/.cache}/luaop}
case $cache in /*) ;; *) cache="$PWD/$cache" ;; esac
log() { printf 'libs: %s\n' "$*" >&2; }
here=$(cd "$(dirname "$0")" && pwd) # hack/: lua/*.patch beside this script
die() { log "$*"; exit 1; }
command -v apt-get >/dev/null && command -v dpkg-source >/dev/null ||
  die "building the HTTP and TLS stack needs Debian's apt-get and dpkg-source: run 'hack/deps.sh build'"

# Debian's source packages are found through a private apt configuration in
# the cache: source entries derived from the machine's own binary ones, and
# lists and caches of their own. /etc/apt and the system's package lists are
# not touched, and no root is needed.
# apt_conf DIR: a private apt configuration in DIR
apt_conf() {
  mkdir -p "$1/sources.list.d" "$1/lists/partial" "$1/cache/archives/partial" ||
    die "could not create $1 (set LUAOP_CACHE to a writable directory)"
  {
    echo "Dir::Etc::SourceList \"$1/sources.list\";"
    echo "Dir::Etc::SourceParts \"$1/sources.list.d\";"
    echo "Dir::State::Lists \"$1/lists\";"
    echo "Dir::Cache \"$1/cache\";"
    # the system's hooks (docker-clean, appstream, packagekit) are for its lists
    echo "#clear APT::Update::Pre-Invoke;"
    echo "#clear APT::Update::Post-Invoke;"
    echo "#clear APT::Update::Post-Invoke-Success;"
    # as root, apt hands downloads to user _apt, who cannot enter a private cache
    [ "$(id -u)" != 0 ] || echo "APT::Sandbox::User \"root\";"
  } >"$1/apt.conf"
}
apt="$cache/apt"
apt_conf "$apt"
aptc=(-c "$apt/apt.conf")

# Lua's source comes from this suite of the same archive (the machine's
# entries for its own suite, with LUA_SUITE instead), in a configuration of
# its own so that nothing else is taken from that suite: LUA_VERSION, the
# newest Debian revision of it.
LUA_SUITE=trixie
LUA_VERSION=5.4.7
apt_lua="$cache/apt-lua"
apt_conf "$apt_lua"
aptl=(-c "$apt_lua/apt.conf")
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")

# deb-src entries for every deb entry of the machine: deb822 .sources files
# (Types: deb -> deb-src) and one-line .list files (deb -> deb-src).
derive_sources() {
  local f n=0 tmp="$apt/derive.$$"
  rm -f "$apt/sources.list.d/"* && : >"$tmp"
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -qE '^Types:.*\<deb\>' "$f" || continue
    sed -E 's/^Types:.*/Types: deb-src/' "$f" >"$apt/sources.list.d/$(basename "$f")" || return 1
    n=$((n + 1))
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -nE 's/^[[:space:]]*deb([[:space:]].*)/deb-src\1/p' "$f" >>"$tmp" || return 1
  done
  [ -s "$tmp" ] && n=$((n + 1))
  mv "$tmp" "$apt/sources.list"
  [ "$n" -gt 0 ]
}

# deb-src entries for LUA_SUITE: each deb822 stanza and one-line entry of
# the machine whose suites include its own codename, with LUA_SUITE alone.
derive_lua_sources() {
  local f
  [ -n "$codename" ] || return 1
  rm -f "$apt_lua/sources.list.d/"* && : >"$apt_lua/sources.list"
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v cn="$codename" -v suite="$LUA_SUITE" '
      function flush() {
        if (stanza != "" && deb && mine) printf "%s\n", stanza
        stanza = ""; deb = 0; mine = 0
      }
      /^[[:space:]]*$/ { flush(); next }
      /^Types:/ { deb = ($0 ~ /[[:space:]]deb([[:space:]]|$)/); $0 = "Types: deb-src" }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == cn) mine = 1; $0 = "Suites: " suite }
      { stanza = stanza $0 "\n" }
      END { flush() }' "$f" >"$apt_lua/sources.list.d/$(basename "$f")" || return 1
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -nE "s/^[[:space:]]*deb([[:space:]]+(\[[^]]*\][[:space:]]+)?[^[:space:]]+[[:space:]]+)$codename([[:space:]].*)/deb-src\1$LUA_SUITE\3/p" \
      "$f" >>"$apt_lua/sources.list" || return 1
  done
  # (grep, not cat | grep: a glob that matched nothing must not fail it)
  grep -qs . "$apt_lua/sources.list" "$apt_lua/sources.list.d/"*
}

# The source packages' versions, newest first (none: empty).
versions() { { apt-cache "${aptc[@]}" showsrc "$1" 2>/dev/null || true; } | awk '/^Version:/ {print $2}' | sort -Vru; }
lua_versions() {
  { apt-cache "${aptl[@]}" showsrc lua5.4 2>/dev/null || true; } | awk '/^Version:/ {print $2}' |
    grep -E "^$LUA_VERSION-" | sort -Vru
}

# apt-get update of the private lists: false when apt failed or could not
# fetch an index (it says so only with a warning and exit 0)
update_lists() {
  log "reading Debian's source package index (apt-get update with the private configuration in $apt; /etc/apt is not changed)"
  apt-get "${aptc[@]}" update -q >"$apt/update.log" 2>&1 && ! grep -qE '^(E:|W: Failed|Err:)' "$apt/update.log"
}

# The lists are refreshed when missing or a week old; offline, old ones do
# ($apt/updated marks the last good update: apt dates the lists themselves
# by the archive's Release, which may be months old).
have_lists() { compgen -G "$apt/lists/*Sources*" >/dev/null; }
fresh_lists() { have_lists && [ -n "$(find "$apt/updated" -mtime -7 2>/dev/null)" ]; }
if ! fresh_lists; then
  derive_sources || die "no deb entries in /etc/apt/sources.list or /etc/apt/sources.list.d/ to derive source entries from"
  if update_lists; then
    touch "$apt/updated"
  else
    grep -E '^(E|W):' "$apt/update.log" | sed 's/^/  apt: /' >&2 || true
    have_lists ||
      die "could not read Debian's source package index (apt's errors above, all of it in $apt/update.log): check the network to the package mirror"
    log "could not refresh every source index (above); going on with the lists there are, and trying again in a week"
    # (a repository without source packages fails every update: not each make)
    touch "$apt/updated"
  fi
fi
# the same for Lua's suite (its own marker: lists refreshed weekly)
if ! { compgen -G "$apt_lua/lists/*Sources*" >/dev/null && [ -n "$(find "$apt_lua/updated" -mtime -7 2>/dev/null)" ]; }; then
  derive_lua_sources ||
    die "no deb entry for this machine's suite ($codename) in /etc/apt to derive $LUA_SUITE's source entries from"
  log "reading $LUA_SUITE's source package index, for Lua (private configuration in $apt_lua)"
  if apt-get "${aptl[@]}" update -q >"$apt_lua/update.log" 2>&1 && ! grep -qE '^(E:|W: Failed|Err:)' "$apt_lua/update.log"; then
    touch "$apt_lua/updated"
  else
    grep -E '^(E|W):' "$apt_lua/update.log" | sed 's/^/  apt: /' >&2 || true
  fi
fi
curl_vs=$(versions curl)
ssl_vs=$(versions openssl)
lua_vs=$(lua_versions)
mhd_vs=$(versions libmicrohttpd)
event_vs=$(versions libevent)
[ -n "$lua_vs" ] ||
  die "apt offers no source package of lua5.4 $LUA_VERSION through $apt_lua/sources.list* ($LUA_SUITE, derived from /etc/apt's deb entries); $apt_lua/update.log has apt's output"
[ -n "$curl_vs" ] && [ -n "$ssl_vs" ] && [ -n "$mhd_vs" ] && [ -n "$event_vs" ] ||
  die "apt offers no source package of curl, openssl, libmicrohttpd or libevent through $apt/sources.list* (derived from /etc/apt's deb entries): they must name Debian's archive (or a mirror of it that serves source packages); $apt/update.log has apt's output"

# The key: the machine, the source versions apt offers, and this script.
key=$( (uname -m; echo "$curl_vs"; echo "$ssl_vs"; echo "lua5.4 $lua_vs"; echo "libmicrohttpd $mhd_vs"; echo "libevent $event_vs"; cat "$0" "$here"/lua/*.patch) | sha256sum | cut -c1-16)
dir="$cache/libs-$key"

# A build made from an older source than the newest offered (the newest did
# not download: a security update's source can lag behind its binaries) is
# retried with the newest once the lists have been read again since.
newest_ssl=${ssl_vs%%$'\n'*} newest_curl=${curl_vs%%$'\n'*}
stale() {
  [ -e "$dir/lib/libcurl.a" ] && [ -e "$dir/VERSIONS" ] || return 1
  grep -qx "openssl $newest_ssl" "$dir/VERSIONS" && grep -qx "curl $newest_curl" "$dir/VERSIONS" && return 1
  [ "$apt/updated" -nt "$dir/VERSIONS" ]
}
retry=""
if stale; then
  retry=1
  ssl_vs=$newest_ssl curl_vs=$newest_curl
  log "the cached build is of $(paste -sd, "$dir/VERSIONS"); trying the newest sources, openssl $newest_ssl and curl $newest_curl"
fi

if [ ! -e "$dir/lib/libcurl.a" ] || [ ! -e "$dir/lib/libmicrohttpd.a" ] || [ ! -e "$dir/lib/libevent_openssl.a" ] ||
  [ -n "$retry" ]; then
  work=$(mktemp -d)
  stage="$dir.tmp.$$"
  trap 'rm -rf "$work" "$stage"' EXIT
  # fetch NAME VERSIONS [APT-OPTIONS...]: the newest version of source
  # package NAME that downloads (a security update's source can lag behind
  # its binaries), unpacked with Debian's patches into $work/NAME
  fetch() {
    local v name=$1 vs=$2
    shift 2
    [ $# -gt 0 ] || set -- "${aptc[@]}"
    set -- "$name" "$vs" "$@"
    for v in $2; do
      if (cd "$work" && apt-get "${@:3}" source --download-only -q "$1=$v" >"$work/$1.fetch.log" 2>&1); then
        (cd "$work" && dpkg-source -x "$1"_*.dsc "$1" >"$work/$1.unpack.log" 2>&1) ||
          { cat "$work/$1.unpack.log" >&2; return 1; }
        echo "$1 $v" >>"$work/VERSIONS"
        log "building $1 $v"
        return 0
      fi
      rm -f "$work/$1"_*
    done
    grep -E '^(E|W|Err):' "$work/$1.fetch.log" >&2 || true
    log "could not download the source of $1 (any of: $(echo $2)): check the network to the package mirror"
    return 1
  }
  if ! { fetch openssl "$ssl_vs" && fetch curl "$curl_vs" && fetch lua5.4 "$lua_vs" "${aptl[@]}" && fetch libmicrohttpd "$mhd_vs" &&
    fetch libevent "$event_vs"; }; then
    [ -n "$retry" ] || exit 1
    # not yet: keep the older build until the lists are read again
    touch "$dir/VERSIONS"
    log "keeping the build of $(paste -sd, "$dir/VERSIONS") until the next refresh of the source lists"
    rm -rf "$work"
    exec "$0" "$out" ${stamp:+"$stamp"} # now not stale: only the link
  fi
  rm -rf "$stage"
  # libcurl's configure goes on without what it cannot find, and the build
  # is cached: a libcurl built before nghttp2's headers were installed
  # spoke HTTP/1.1 only until the cache key changed
  for p in libnghttp2 zlib; do
    pkg-config --exists "$p" || die "$p's headers are missing (run 'hack/deps.sh build' first): libcurl would be built without it"
  done
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
  ) || { tail -n 30 "$work/openssl.log" >&2; die "OpenSSL did not build (its log's end is above)"; }
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
    grep -q "^#define USE_NGHTTP2 1" lib/curl_config.h || { echo "libcurl: configured without HTTP/2" >>"$work/curl.log"; false; }
    make -j"$jobs" -C lib >>"$work/curl.log" 2>&1
    make -C lib install >>"$work/curl.log" 2>&1
    make -C include install >>"$work/curl.log" 2>&1
  ) || { tail -n 30 "$work/curl.log" >&2; die "libcurl did not build (its log's end is above)"; }
  # libmicrohttpd: the metrics and probe server, plain HTTP only (no
  # second TLS stack: its HTTPS is GnuTLS), epoll, no authentication,
  # form parsing or upgrades (nothing luaop serves uses them)
  (
    cd "$work/libmicrohttpd"
    ./configure --prefix="$stage" --includedir="$stage/mhd" --disable-shared --enable-static --with-pic \
      --disable-https --without-gnutls --disable-curl --disable-doc --disable-examples \
      --disable-postprocessor --disable-dauth --disable-bauth --disable-httpupgrade --disable-nls \
      --enable-epoll --disable-sendfile CFLAGS="$flags" >"$work/libmicrohttpd.log" 2>&1
    make -j"$jobs" -C src/microhttpd >>"$work/libmicrohttpd.log" 2>&1
    make -C src/microhttpd install >>"$work/libmicrohttpd.log" 2>&1
    make -C src/include install >>"$work/libmicrohttpd.log" 2>&1
  ) || { tail -n 30 "$work/libmicrohttpd.log" >&2; die "libmicrohttpd did not build (its log's end is above)"; }
  # libevent: the webhook's HTTPS server (evhttp over OpenSSL bufferevents)
  # against the OpenSSL above, headers in event/. Debian's patches touch
  # Makefile.am: the generated files are made newer than their inputs so
  # that make does not run automake (not a build dependency). No thread
  # support: each server's event_base is used by its own thread alone.
  (
    cd "$work/libevent"
    find . \( -name '*.am' -o -name configure.ac -o -path './m4/*' \) -exec touch -d @946684800 {} +
    PKG_CONFIG_PATH="$stage/lib/pkgconfig" ./configure --prefix="$stage" --includedir="$stage/event" \
      --disable-shared --enable-static --with-pic --disable-samples --disable-libevent-regress \
      --disable-debug-mode --disable-thread-support --enable-openssl CFLAGS="$flags" >"$work/libevent.log" 2>&1
    grep -qE "^OPENSSL_INCS = -I$stage/include" Makefile ||
      { echo "libevent: configured against another OpenSSL than $stage" >>"$work/libevent.log"; false; }
    make -j"$jobs" >>"$work/libevent.log" 2>&1
    make install >>"$work/libevent.log" 2>&1
    rm -f "$stage/bin/event_rpcgen.py"
    rmdir "$stage/bin" 2>/dev/null || true
  ) || { tail -n 30 "$work/libevent.log" >&2; die "libevent did not build (its log's end is above)"; }
  # Lua: the later upstream fixes; then its pattern matcher charged per
  # step in lstrpat.c (the line after the label its match() loops back
  # to), lstrlib.c left as it is for the specs' interpreter
  for p in "$here"/lua/*.patch; do
    patch -p1 -d "$work/lua5.4/src" <"$p" >>"$work/lua.log" 2>&1 ||
      { cat "$work/lua.log" >&2; die "$p does not apply to $(grep lua5.4 "$work/VERSIONS")"; }
  done
  mkdir -p "$stage/lua"
  cp "$work/lua5.4/src/"*.[ch] "$stage/lua/"
  rm -f "$stage/lua/luac.c"
  # Debian's luaconf.h (its module paths, as the system's lua5.4 has them,
  # so busted is found) includes a header its build makes
  printf '#ifndef _LUA_DEB_MULTIARCH_\n#define _LUA_DEB_MULTIARCH_\n#define DEB_HOST_MULTIARCH "%s"\n#endif\n' \
    "$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)" >"$stage/lua/lua5.4-deb-multiarch.h"
  sed -E 's|^  init: /\* using goto.* to optimize tail recursion \*/$|&\n  LUAOP_MATCH_STEP(ms->L);|' \
    "$stage/lua/lstrlib.c" >"$stage/lua/lstrpat.c"
  [ "$(grep -c 'LUAOP_MATCH_STEP' "$stage/lua/lstrpat.c")" = 1 ] ||
    die "lstrlib.c of $(grep lua5.4 "$work/VERSIONS") has no 'init:' line in match() to charge pattern steps at"
  cp "$work/VERSIONS" "$stage/"
  rm -rf "$dir"
  mv "$stage" "$dir"
  built=1
fi

mkdir -p "$(dirname "$out")"
# the stamp (make's) changes only when the link does, so luaop relinks then
if [ "$(readlink "$out" 2>/dev/null)" != "$dir" ] || [ -n "${built:-}" ] || { [ -n "$stamp" ] && [ ! -e "$stamp" ]; }; then
  ln -sfn "$dir" "$out"
  [ -z "$stamp" ] || touch "$stamp"
fi
echo "libs: $out -> $dir ($(paste -sd, "$dir/VERSIONS" | sed "s/,/, /g"))"

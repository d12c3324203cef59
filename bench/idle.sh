#!/usr/bin/env bash
# bench/idle.sh [IDLE_SECONDS]: the resident memory of an idle luaop, in one
# run against the local control plane (make cluster-up).
#
# Runs bench/idle.lua (three controllers, on Secrets, Services and
# Deployments of a fresh namespace that has none: three informers with empty
# caches, three watches) and, IDLE_SECONDS (default 3) after "caches synced",
# reads VmRSS (RssAnon + RssFile) from /proc/PID/status, Pss and Private from
# /proc/PID/smaps_rollup, the Lua heap (collectgarbage "count", as is and
# after a full GC), and which mappings the resident pages belong to
# (/proc/PID/smaps). Then the same under MALLOC_ARENA_MAX=1 and under
# LD_BIND_NOW=1, and (with gdb) after malloc_trim(0) in the first process.
# LUAOP=path measures another build of luaop. Goal: VmRSS <= 6 MiB. Last,
# the same for the four example operators (`--script operators/`).
idle=${1:-3}
. "$(dirname "$0")/lib.sh" idle

kib() { awk -v k="$1:" '$1 == k {print $2}' "$2"; }
# start [VAR=value...]: run luaop in the background until its caches synced
# and it idled; sets pid
start() {
  rm -f "$tmp/log" "$tmp/lua"
  env "$@" "$bin" --kubeconfig "$KUBECONFIG" --program bench/idle.lua -- "$ns" "$tmp/req" "$tmp/lua" 2>"$tmp/log" &
  pid=$!
  synced
}
# synced: wait for "caches synced" in the log, then idle
synced() {
  wait_until "caches synced" grep -q "caches synced" "$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
  sleep "$idle"
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }
# report LABEL: one line of numbers about $pid
report() {
  cp "/proc/$pid/status" "$tmp/status"
  cp "/proc/$pid/smaps_rollup" "$tmp/rollup"
  printf '%-22s %7d %7d %7d %7d %7d %7d\n' "$1" "$(kib VmRSS "$tmp/status")" "$(kib RssAnon "$tmp/status")" \
    "$(kib RssFile "$tmp/status")" "$(kib Pss "$tmp/rollup")" \
    "$(( $(kib Private_Clean "$tmp/rollup") + $(kib Private_Dirty "$tmp/rollup") ))" "$(kib Private_Dirty "$tmp/rollup")"
}
header() { printf '%-22s %7s %7s %7s %7s %7s %7s   (KiB)\n' "" VmRSS RssAnon RssFile Pss Private Pr.Dirty; }

start
header
report "default"
cp "/proc/$pid/smaps" "$tmp/smaps"
touch "$tmp/req"
wait_until "the Lua heap figures" test -e "$tmp/lua"
lua_kib=$(awk '$1 == "lua_kib" {print $2}' "$tmp/lua") lua_gc_kib=$(awk '$1 == "lua_gc_kib" {print $2}' "$tmp/lua")
if command -v gdb >/dev/null; then
  gdb -p "$pid" -batch -ex 'call (int)malloc_trim(0)' >/dev/null 2>&1 && report "after malloc_trim(0)"
fi
stop
for v in MALLOC_ARENA_MAX=1 LD_BIND_NOW=1; do
  start "$v"
  report "$v"
  stop
done
# the four example operators, their caches holding what the cluster has
kc apply -k manifests/crds >/dev/null
kc wait --for condition=Established crd --all --timeout=60s >/dev/null
rm -f "$tmp/log"
"$bin" --kubeconfig "$KUBECONFIG" --script operators/ 2>"$tmp/log" &
pid=$!
synced
report "operators/ (four)"
stop

echo
echo "Lua heap: $lua_kib KiB, $lua_gc_kib KiB after a full GC"
echo "Resident KiB by mapping (default run): Rss, Pss, Private_Dirty"
# libcurl's dependencies beyond TLS, HTTP/2 and zlib (GnuTLS via librtmp and
# libldap, Kerberos, LDAP, SASL, libssh2, libpsl, libidn2, brotli, zstd...)
# are summed as "unused"
awk '
  /^[0-9a-f]+-[0-9a-f]+ / { name = NF >= 6 ? $6 : "[anon]"; sub(".*/", "", name); next }
  $1 == "Rss:" { rss[name] += $2 } $1 == "Pss:" { pss[name] += $2 } $1 == "Private_Dirty:" { pd[name] += $2 }
  END {
    for (n in rss) {
      if (n ~ /^(luaop|\[.*\]|libc\.|libm\.|ld-linux|liblua|libuv|libyaml|libcurl|libssl|libcrypto|libnghttp2|libz\.)/) {
        if (rss[n] >= 64) printf "  %-28s %6d %6d %6d\n", n, rss[n], pss[n], pd[n]
        else { sr += rss[n]; sp += pss[n]; sd += pd[n] }
      } else { ur += rss[n]; up += pss[n]; ud += pd[n]; un++ }
    }
    printf "  %-28s %6d %6d %6d\n", "(" un " unused libraries)", ur, up, ud
    printf "  %-28s %6d %6d %6d\n", "(the rest)", sr, sp, sd
  }' "$tmp/smaps" | sort -k2 -rn

#!/usr/bin/env bash
# bench/testkit.sh [ROUNDS]: how long the operators' unit specs take with the
# test kit (no cluster): `build/luaop --test` over spec/unit/operators, all
# four and each alone, ROUNDS times (default 10). Prints the median and worst
# wall time and the peak RSS of each; the goal is well under a second per
# operator. Nothing to bring up: the kit serves the API in memory and its
# clock jumps over every requeue_after and backoff.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
bin=${LUAOP_BIN:-build/luaop}
[ -x "$bin" ] || { echo "testkit: $bin is missing (make all)" >&2; exit 1; }

measure() { # label path
  local i times=() rss=0 out tmp
  tmp=$(mktemp)
  for i in $(seq 1 "$rounds"); do
    /usr/bin/time -o "$tmp" -f '%e %M' "$bin" --test "$2" >/dev/null 2>&1
    out=$(tail -n 1 "$tmp")
    times+=("${out% *}")
    [ "${out#* }" -gt "$rss" ] && rss=${out#* }
  done
  rm -f "$tmp"
  printf '%s\n' "${times[@]}" | sort -n | awk -v l="$1" -v r="$rss" -v n="$rounds" \
    '{ t[NR] = $1 } END { printf "%-22s median %.2f s, worst %.2f s, peak RSS %.1f MiB (%d rounds)\n", l, t[int((n + 1) / 2)], t[n], r / 1024, n }'
}

"$bin" --test spec/unit/operators | tail -n 1
measure "all four" spec/unit/operators
for f in at useless_machine secret_copy pod_watcher; do
  measure "$f" "spec/unit/operators/${f}_spec.lua"
done

#!/usr/bin/env bash
# bench/cache.sh [N] [ROUNDS]: what the informer cache costs against a raw
# LIST of the same objects, in one run against the local control plane
# (make cluster-up).
#
# Creates N ConfigMaps of about 1 KiB (compact JSON) in a fresh namespace,
# 100 creates at once (bench/cache.lua create, --qps 0). Then, ROUNDS times,
# two luaop processes (bench/cache.lua):
#   time    one process: a raw paged LIST (limit=500 pages through
#           core.api.request, bodies not decoded), the same decoded but not
#           kept, and an informer from start() to wait_synced();
#   memory  a fresh process with an informer only, so that no LIST's garbage
#           counts: VmRSS growth from before start() to after wait_synced(),
#           per cached object, over the object's compact JSON size (as
#           luaop.json encodes it without managedFields, as the cache keeps
#           it). Read after a full GC, and again without one.
# Prints the medians and the ratios sync / raw LIST (goal <= 1.3) and RSS per
# object / JSON per object (goal <= 2). Deletes the namespace at the end.
n=${1:-10000}
rounds=${2:-3}
. "$(dirname "$0")/lib.sh" cache
luaop() { "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/cache.lua -- "$@"; }
luaop create "$ns" "$n" >"$tmp/create"
echo "created $n ConfigMaps in $(awk '{print $2}' "$tmp/create") s"

for _ in $(seq 1 "$rounds"); do
  luaop time "$ns" >>"$tmp/out"
  luaop memory "$ns" >>"$tmp/out"
done

median() { grep "^$1 " "$tmp/out" | awk '{print $2}' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for m in items list_raw_s list_decoded_s sync_s sync_alone_s json_bytes rss_before_kib rss_after_kib \
         rss_per_obj rss_per_obj_nogc lua_per_obj lua_per_obj_nogc; do
  eval "$m=$(median $m)"
done
# shellcheck disable=SC2154 # set by the eval above
{
  printf 'objects %d (N=%d + kube-root-ca.crt), %d pages, medians of %d rounds\n' "$items" "$n" "$(median pages)" "$rounds"
  printf '%-34s %10.3f s\n' "raw LIST (not decoded)" "$list_raw_s"
  printf '%-34s %10.3f s\n' "LIST decoded, not kept" "$list_decoded_s"
  printf '%-34s %10.3f s   (%.3f s alone in the memory process)\n' "informer start to synced" "$sync_s" "$sync_alone_s"
  printf '%-34s %10.2f     goal <= 1.3\n' "ratio sync / raw LIST" "$(echo "$sync_s / $list_raw_s" | bc -l)"
  printf '%-34s %10.2f\n' "ratio sync / decoded LIST" "$(echo "$sync_s / $list_decoded_s" | bc -l)"
  printf '%-34s %10.0f B\n' "compact JSON per object" "$json_bytes"
  printf '%-34s %10d -> %d KiB\n' "VmRSS before start -> synced" "$rss_before_kib" "$rss_after_kib"
  printf '%-34s %10.0f B   ratio to JSON %.2f   goal <= 2\n' "VmRSS growth per object (GC)" "$rss_per_obj" "$(echo "$rss_per_obj / $json_bytes" | bc -l)"
  printf '%-34s %10.0f B   ratio to JSON %.2f\n' "VmRSS growth per object (no GC)" "$rss_per_obj_nogc" "$(echo "$rss_per_obj_nogc / $json_bytes" | bc -l)"
  printf '%-34s %10.0f B   ratio to JSON %.2f\n' "Lua heap growth per object (GC)" "$lua_per_obj" "$(echo "$lua_per_obj / $json_bytes" | bc -l)"
  printf '%-34s %10.0f B   ratio to JSON %.2f\n' "Lua heap growth per object (no GC)" "$lua_per_obj_nogc" "$(echo "$lua_per_obj_nogc / $json_bytes" | bc -l)"
}

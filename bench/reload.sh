#!/usr/bin/env bash
# bench/reload.sh [N] [ROUNDS]: hot reload, from a script's change on disk to
# the new code serving, against the local control plane (make cluster-up).
#
# A controller stamps N ConfigMaps with its version. Its script sits in a
# directory laid out as the kubelet lays out a ConfigMap volume, and each
# round swaps ..data to the next version (the kubelet's atomic update). For
# each round: the time from the swap to the first reconcile running the new
# version (read from luaop's own log timestamps), and the number of LIST
# requests luaop made meanwhile (from its trace log of every request).
# Prints the median and worst time, and the total of LISTs (goal: 0).
n=${1:-100}
rounds=${2:-5}
. "$(dirname "$0")/lib.sh" reload
configmaps "$n" "app: reload"

operator() { # version
  cat <<LUA
local luaop = require "luaop"
return luaop.controller {
  name = "stamper", resource = "v1/ConfigMap", namespace = "$ns", label_selector = "app=reload",
  reconcile = function(ctx, req)
    ctx.log:info("reconciling", { version = "$1" })
    local cm = ctx:get("ConfigMap", req)
    if not cm or (cm.metadata.annotations or {}).version == "$1" then return end
    local _, err = ctx:patch("ConfigMap", req, { metadata = { annotations = { version = "$1" } } })
    if err then error(err) end
  end,
}
LUA
}
# the kubelet's atomic writer: new dir, ..data_tmp -> it, rename over ..data
vol=$tmp/vol
mkdir -p "$vol"
publish() { # version
  mkdir "$vol/..v$1"
  operator "$1" >"$vol/..v$1/stamper.lua"
  ln -s "..v$1" "$vol/..data_tmp"
  mv -T "$vol/..data_tmp" "$vol/..data"
  [ -L "$vol/stamper.lua" ] || ln -s ..data/stamper.lua "$vol/stamper.lua"
  [ "$1" -gt 1 ] && rm -rf "$vol/..v$(($1 - 1))"
  return 0
}
publish 1
log=$tmp/log
"$bin" --kubeconfig "$KUBECONFIG" --log-format json --log-level trace --script "$vol" 2>"$log" &
pid=$!
stamped() { # version: all N ConfigMaps carry it
  [ "$(kc get configmaps -n "$ns" -o jsonpath='{range .items[*]}{.metadata.annotations.version}{"\n"}{end}' | grep -cx "$1")" = "$n" ]
}
wait_until "version 1 everywhere" stamped 1
ms() { echo $(( $(date -d "$1" +%s%N) / 1000000 )); }
lists() { # syncs in log lines from $1 on: LISTs (responses) and streamed ones (as they start)
  tail -n +"$1" "$log" | awk '/"method":"GET"/ && /"path":"[^"]*configmaps\?/ {
    if (/"msg":"response"/ && !/watch=true/) n++
    if (/"msg":"stream started"/ && /sendInitialEvents=true/) n++
  } END {print n + 0}'
}

first_new() { grep -m1 "\"msg\":\"reconciling\".*\"version\":\"$1\"" "$log" | grep -o '"ts":"[^"]*"' | cut -d'"' -f4; }
serving() { [ -n "$(first_new "$1")" ]; }
times=()
total_lists=0
for v in $(seq 2 $((rounds + 1))); do
  from=$(($(wc -l <"$log") + 1))
  t0=$(date +%s%3N)
  publish "$v"
  wait_until "version $v serving" serving "$v"
  t1=$(ms "$(first_new "$v")")
  times+=($((t1 - t0)))
  wait_until "version $v everywhere" stamped "$v"
  total_lists=$((total_lists + $(lists "$from")))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(( (rounds + 1) / 2 ))p")
worst=$(echo "$sorted" | tail -1)
echo "objects $n, rounds $rounds: change to new code serving median ${median} ms, worst ${worst} ms (goal <= 50); LISTs (or streamed syncs) caused: $total_lists (goal 0)"

#!/usr/bin/env bash
# spec/guarantees.sh - after the suites: every spec title that
# docs/guarantees.md names (the second column of its "| promise | spec |"
# tables, in backticks) must have run and passed in this run (build/test/*.tap).
# Writes one TAP line per promise to build/test/guarantees.tap; exits 1 if any
# is missing or failed. A title of spec/image or spec/incluster counts as
# skipped where that suite was skipped.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=build/test
doc=docs/guarantees.md
[ -f "$doc" ] || { echo "guarantees: $doc is missing" >&2; exit 1; }

# title<TAB>result for every spec line of this run's suites: ok, not ok, or skip
results=$(cat $(ls "$out"/*.tap | grep -v '/guarantees.tap$') 2>/dev/null |
  sed -nE 's/^ok [0-9]+ - (# SKIP.*)$/\1\tskip/p; s/^ok [0-9]+ - (.*)$/\1\tok/p; s/^not ok [0-9]+ - (.*)$/\1\tnot ok/p')
image_skipped=""
grep -qx 'ok 1 - # SKIP spec/image: .*' "$out/image.tap" 2>/dev/null && image_skipped=1
incluster_skipped=""
down_skipped=""
grep -qx 'ok 1 - # SKIP cluster-down: .*' "$out/cluster-down.tap" 2>/dev/null && down_skipped=1
grep -qx 'ok 1 - # SKIP spec/incluster: .*' "$out/incluster.tap" 2>/dev/null && incluster_skipped=1

# the titles: rows of the tables headed "| promise | spec |"
titles=$(awk '
  /^\| promise \| spec \|/ { t = 1; next }
  t && /^\|/ { if ($0 ~ /^\| ---/) next; n = split($0, c, "|"); s = c[n - 1]
    if (match(s, /`[^`]+`/)) print substr(s, RSTART + 1, RLENGTH - 2); next }
  { t = 0 }' "$doc")
[ -n "$titles" ] || { echo "guarantees: no spec titles found in $doc" >&2; exit 1; }

status=0 i=0
: >"$out/guarantees.tap"
while IFS= read -r title; do
  i=$((i + 1))
  r=$(printf '%s\n' "$results" | T="$title" awk -F'\t' '$1 == ENVIRON["T"] { print $2 }' | sort -u)
  if [ "$r" = ok ]; then
    echo "ok $i - guarantee proven: $title"
  elif [ -z "$r" ] && [ -n "$image_skipped" ] && [[ $title == "the luaop image "* ]]; then
    echo "ok $i - # SKIP guarantee: $title (spec/image was skipped)"
  elif [ -z "$r" ] && [ -n "$incluster_skipped" ] && [[ $title == "luaop as a Pod on a real node "* ]]; then
    echo "ok $i - # SKIP guarantee: $title (spec/incluster was skipped)"
  elif [ -z "$r" ] && [ -n "$down_skipped" ] && [[ $title == "make cluster-down "* ]]; then
    echo "ok $i - # SKIP guarantee: $title (the control plane was up before the run and stays up)"
  elif [ -z "$r" ]; then
    echo "not ok $i - guarantee proven: $title (no spec of that title ran)"
    status=1
  else
    echo "not ok $i - guarantee proven: $title (it failed)"
    status=1
  fi
done <<<"$titles" >>"$out/guarantees.tap"
echo "1..$i" >>"$out/guarantees.tap"
grep '^not ok' "$out/guarantees.tap" || true
echo "guarantees: $i promises of $doc checked"
exit "$status"

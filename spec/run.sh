#!/usr/bin/env bash
# Run the busted specs and end with one line "N passed, N failed[, N skipped]".
#
#   spec/run.sh unit   spec/unit/  (no cluster)
#   spec/run.sh e2e    spec/e2e/   (the local control plane: reused when it is
#                                   up, else brought up and taken down after)
#   spec/run.sh all    both
#
# Each suite writes TAP to build/test/<suite>.tap; the tally counts its lines.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-all}
out=build/test
mkdir -p "$out"
rm -f "$out"/*.tap

busted_bin=$(command -v busted) || { echo "spec: busted is missing; run 'make deps'" >&2; exit 1; }
status=0

# busted's own script starts "lua"; run it under Lua 5.4 whatever that names.
run_suite() {
  local suite=$1
  shift
  echo "== spec/$suite"
  lua5.4 "$busted_bin" --output=TAP "$@" "spec/$suite" | tee "$out/$suite.tap"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
}

# A step that failed before busted could count it still counts as a failure.
fail_step() {
  printf 'not ok 1 - %s\n' "$1" >"$out/$2.tap"
  status=1
}

if [ "$mode" = unit ] || [ "$mode" = all ]; then
  run_suite unit
fi

if [ "$mode" = e2e ] || [ "$mode" = all ]; then
  started=""
  if ! hack/cluster.sh status 2>/dev/null; then
    if hack/cluster.sh up; then
      started=1
    else
      fail_step "the local control plane came up (make cluster-up)" e2e
    fi
  fi
  if [ ! -f "$out/e2e.tap" ]; then
    eval "$(hack/cluster.sh env)"
    export KUBECONFIG KUBECTL K8S_BIN KWOK_BIN
    run_suite e2e
  fi
  if [ -n "$started" ]; then
    hack/cluster.sh down || fail_step "the local control plane went down (make cluster-down)" e2e-down
  fi
fi

passed=$(cat "$out"/*.tap 2>/dev/null | grep -cE '^ok [0-9]+ - ' || true)
skipped=$(cat "$out"/*.tap 2>/dev/null | grep -cE '^ok [0-9]+ - # SKIP' || true)
failed=$(cat "$out"/*.tap 2>/dev/null | grep -cE '^not ok [0-9]+ ' || true)
passed=$((passed - skipped))
if [ $((passed + failed)) = 0 ]; then
  echo "spec: no spec ran" >&2
  status=1
fi
[ "$failed" = 0 ] || status=1
if [ "$skipped" = 0 ]; then
  echo "$passed passed, $failed failed"
else
  echo "$passed passed, $failed failed, $skipped skipped"
fi
exit "$status"

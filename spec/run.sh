#!/usr/bin/env bash
# Run the busted specs and end with one line "N passed, N failed[, N skipped]".
#
#   spec/run.sh unit   luacheck (.luacheckrc), then spec/unit/ (no cluster)
#   spec/run.sh e2e    spec/e2e/   (the local control plane: reused when it is
#                                   up, else brought up and taken down after)
#   spec/run.sh image  spec/image/ (the image built and run as a container
#                                   against the local control plane; needs root)
#   spec/run.sh incluster spec/incluster/ (luaop's image as a Pod on the
#                      local control plane's real node; needs root)
#   spec/run.sh all    all four; spec/image and spec/incluster run when the
#                      machine can build images (root, buildah and runc:
#                      hack/deps.sh image), else they are reported as
#                      skipped. When the run brings the control plane up
#                      itself, it also checks that taking it down left
#                      nothing behind (spec/support/machine-state.sh).
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

# busted's own script starts "lua"; it runs on the Lua luaop is built with,
# build/bin/lua (the same source, hack/libs.sh), not the system's: busted's
# C modules take Lua's symbols from it. LUA may name another (the ASan build).
lua=${LUA:-build/bin/lua}
# run_suite NAME [PATH...]: the specs under PATH (default spec/NAME), TAP in
# build/test/NAME.tap.
run_suite() {
  local suite=$1
  shift
  (($#)) || set -- "spec/$suite"
  echo "== $suite: $*${LUAOP_BIN:+ (luaop: $LUAOP_BIN)}"
  local t0=$SECONDS
  "$lua" "$busted_bin" --output=TAP "$@" | tee "$out/$suite.tap"
  echo "== $suite took $((SECONDS - t0)) s"
  if [ "${PIPESTATUS[0]}" != 0 ]; then
    status=1
    # busted failed, yet no spec did (it crashed at exit): count that
    grep -q '^not ok' "$out/$suite.tap" ||
      echo "not ok 0 - $suite: busted exited with an error after its specs" | tee -a "$out/$suite.tap"
  fi
  # A suite that died half way has no closing plan: that is a failure too.
  if ! tail -n 1 "$out/$suite.tap" | grep -q '^1\.\.[0-9]'; then
    echo "not ok 0 - spec/$suite did not run to its end" | tee -a "$out/$suite.tap"
    status=1
  fi
}

# The unit spec files that run alone in each pass: what they assert is
# timing that holds while luaop has the machine's CPU (a steady controller
# keeps ticking through attacks that burn it), which specs running beside
# them would take (metrics_spec.lua: its probe server answers a flood of
# 320 connections, 256 within a window shorter than its idle timeout; with
# three spec files beside it on two cores it answered 152).
solo=(
  spec/unit/ccalls_spec.lua
  spec/unit/containment_spec.lua
  spec/unit/metrics_spec.lua
)

# run_pool NAME JOBS CMD FILES: each spec file of the array named FILES run
# by a busted of its own (CMD, the array named so: a Lua and what it runs
# under), JOBS at a time. The unit specs wait far more than they compute
# (children, timeouts, the clock): one after another they took 6.5 minutes
# of 1 minute's CPU. The slowest start first, by the times of the last run
# (build/spec-times/NAME; a first run goes by file size), those of `solo`
# after the rest, one at a time. Each file's TAP
# and stderr go to build/test/NAME.d/; then, in the files' order, every
# file's lines numbered on in one TAP file, build/test/NAME.tap, a file
# that died or ended without its plan counted as a failure. 0 when every
# file ran to its end and passed.
run_pool() {
  local suite=$1 jobs=$2 dir="$out/$1.d" times="build/spec-times/$1" t0=$SECONDS f i=0 n=0 rc bad=0 line
  local -n cmd=$3 files=$4
  local -A secs=()
  rm -rf "$dir" && mkdir -p "$dir" build/spec-times
  [ -f "$times" ] && while read -r t f; do secs[$f]=$t; done <"$times"
  local order
  order=$(for f in "${files[@]}"; do
    printf '%s %s\n' "${secs[$f]:-$(( $(stat -c %s "$f") / 1000 ))}" "$f"
  done | sort -rn | awk '{ print $2 }')
  # the files of `solo` last, each alone (none running beside it)
  local alone="" at_once=$jobs
  for f in "${solo[@]}"; do
    [ -f "$f" ] || { echo "spec/run.sh: solo names $f, which is gone" >&2; return 1; }
    printf '%s\n' $order | grep -qx -- "$f" && alone+=" $f"
  done
  order=$(printf '%s\n' $order | grep -vxF -f <(printf '%s\n' "${solo[@]}"))
  for f in $order SOLO $alone; do
    if [ "$f" = SOLO ]; then at_once=1; wait; continue; fi
    while [ "$(jobs -rp | wc -l)" -ge "$at_once" ]; do wait -n; done
    local id=${f//\//_}
    (
      s=$SECONDS
      "${cmd[@]}" "$busted_bin" --output=TAP "$f" >"$dir/$id.tap" 2>"$dir/$id.err"
      echo $? >"$dir/$id.rc"
      echo "$((SECONDS - s)) $f" >"$dir/$id.time"
    ) &
  done
  wait
  : >"$out/$suite.tap"
  for f in "${files[@]}"; do
    local id=${f//\//_}
    rc=$(cat "$dir/$id.rc" 2>/dev/null || echo 1)
    while IFS= read -r line; do
      case $line in
        "ok "*|"not ok "*)
          i=$((i + 1))
          line=$(printf '%s' "$line" | sed -E "s/^(not )?ok [0-9]+ /\1ok $i /")
          ;;
        1..*) continue ;;
      esac
      printf '%s\n' "$line"
    done <"$dir/$id.tap" >>"$out/$suite.tap"
    if ! tail -n 1 "$dir/$id.tap" | grep -q '^1\.\.[0-9]'; then
      i=$((i + 1)) bad=1
      echo "not ok $i - $f did not run to its end (exit $rc): $(tail -n 3 "$dir/$id.err" | tr '\n' ' ')" >>"$out/$suite.tap"
    elif [ "$rc" != 0 ] && ! grep -q '^not ok' "$dir/$id.tap"; then
      i=$((i + 1)) bad=1
      echo "not ok $i - $f: busted exited with $rc after its specs: $(tail -n 3 "$dir/$id.err" | tr '\n' ' ')" >>"$out/$suite.tap"
    fi
    grep -q '^not ok' "$dir/$id.tap" && bad=1
    n=$((n + 1))
  done
  echo "1..$i" >>"$out/$suite.tap"
  cat "$dir"/*.time 2>/dev/null | sort -rn >"$times.tmp" && mv "$times.tmp" "$times"
  echo "== $suite: $n spec files, $jobs at a time, took $((SECONDS - t0)) s (the slowest: $(head -n 3 "$times" | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : ""), $2, $1 }'))"
  return "$bad"
}

# The unit specs again with the core built with AddressSanitizer and UBSan,
# then under valgrind: one TAP line each, ok when the run is clean.
# run_memcheck NAME JOBS SPECS CMD...: the spec paths of the array named
# SPECS, each run by CMD (a Lua, and what it runs under), JOBS at a time.
run_memcheck() {
  local name=$1 jobs=$2 log="$out/$1.log" rc=0
  local specs=$3
  shift 3
  local -a under=("$@")
  # (each file in a busted of its own: run_pool; the TAP of all of them
  # is the log, the tally counts the pass's one line)
  run_pool "$name-specs" "$jobs" under "$specs" >/dev/null || rc=1
  mv "$out/$name-specs.tap" "$log"
  cat "$out/$name-specs.d"/*.err >>"$log" 2>/dev/null
  echo "== $name: $(head -n 3 "build/spec-times/$name-specs" | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : ""), $2, $1 }') the slowest"
  if [ "$rc" = 0 ] && ! grep -q '^not ok' "$log"; then
    echo "ok 1 - unit specs run clean under $name" | tee "$out/$name.tap"
  else
    # each failed spec with its message (they may be far from the end),
    # then the end of the log (a sanitizer's report, the exit)
    grep -A 12 '^not ok' "$log" | head -n 120
    tail -n 40 "$log"
    echo "not ok 1 - unit specs run clean under $name (exit $rc; $log)" | tee "$out/$name.tap"
    status=1
  fi
}

# A step that failed before busted could count it still counts as a failure.
fail_step() {
  printf 'not ok 1 - %s\n' "$1" >"$out/$2.tap"
  status=1
}

# luacheck (.luacheckrc) over the tree's Lua: one TAP line, not ok with its
# findings when it has any (spec/unit/luacheck_spec.lua checks the config).
run_luacheck() {
  local title="luacheck finds nothing in lua/, operators/, spec/ and bench/" log="$out/luacheck.log"
  echo "== luacheck: lua operators spec bench"
  if ! command -v luacheck >/dev/null; then
    fail_step "$title (luacheck is missing: hack/deps.sh test)" luacheck
  elif luacheck --codes --formatter plain lua operators spec bench >"$log" 2>&1; then
    echo "ok 1 - $title" | tee "$out/luacheck.tap"
  else
    cat "$log"
    echo "not ok 1 - $title (the findings above; make lint)" | tee "$out/luacheck.tap"
    status=1
  fi
}

# The specs run the shipped binary, build/luaop; the sanitizer passes run
# the unit specs and a subset of the e2e specs against the AddressSanitizer
# and UBSan build (the core module and build/asan/luaop, whose reports fail
# the spec that caused them: spec/support/proc.lua). valgrind runs the unit
# specs' own process (the core module); the luaop processes they start are
# not under it (valgrind follows no children here), so it leaves out the
# unit spec files below.
asan_e2e=(spec/e2e/client_spec.lua spec/e2e/auth_spec.lua spec/e2e/controller_spec.lua spec/e2e/reload_spec.lua
  spec/e2e/webhooks_spec.lua)

# The unit spec files the valgrind pass leaves out: their work is done by
# the programs they start, luaop mostly, and valgrind follows none of them,
# so under it they check nothing but the spec runner, which reads and
# matches those programs' output up to 60 times slower than plain (ccalls,
# containment, metrics_owners and bindings alone took three quarters of the
# pass's time). Each still runs plain and under ASan. Every other unit spec
# file loads luaop's C into the spec runner (the core module, and what is
# built on it: the codecs, the client, the test kit) and runs under
# valgrind; a new file does too unless it is named here.
valgrind_skip=(
  spec/unit/bindings_spec.lua       # drives luaop children only; runs plain and under ASan
  spec/unit/c_spec.lua              # runs the C unit tests (build/ctest, ASan builds) only
  spec/unit/ccalls_spec.lua         # drives luaop children only; runs plain and under ASan
  spec/unit/check_spec.lua          # drives luaop children only; runs plain and under ASan
  spec/unit/cli_spec.lua            # drives luaop children only (one under valgrind itself)
  spec/unit/containment_spec.lua    # drives luaop children only; runs plain and under ASan
  spec/unit/defaults_spec.lua       # drives luaop children only; runs plain and under ASan
  spec/unit/election_spec.lua       # drives luaop children only; runs plain and under ASan
  spec/unit/fence_spec.lua          # drives luaop children only; runs plain and under ASan
  spec/unit/fs_spec.lua             # drives luaop children only; runs plain and under ASan
  spec/unit/fuzz_api_spec.lua       # drives luaop --test children only; runs plain and under ASan
  spec/unit/gcmem_spec.lua          # drives luaop children only (their RSS)
  spec/unit/harness_spec.lua        # the spec harness's Lua and the children it starts only
  spec/unit/http_spec.lua           # drives luaop children only; runs plain and under ASan
  spec/unit/informer_spec.lua       # drives luaop children only; runs plain and under ASan
  spec/unit/layout_spec.lua         # reads the object files with nm only
  spec/unit/libs_spec.lua           # runs hack/libs.sh only
  spec/unit/limits_spec.lua         # drives luaop children only; runs plain and under ASan
  spec/unit/luabugs_spec.lua        # drives luaop children only; runs plain and under ASan
  spec/unit/metrics_spec.lua        # drives luaop children only; runs plain and under ASan
  spec/unit/metrics_owners_spec.lua # drives luaop children only; runs plain and under ASan
  spec/unit/metrics_secure_spec.lua # drives luaop children only; runs plain and under ASan
  spec/unit/owners_spec.lua         # drives luaop children only; runs plain and under ASan
  spec/unit/requeue_spec.lua        # drives luaop children only; runs plain and under ASan
  spec/unit/sandbox_spec.lua        # drives luaop children only; runs plain and under ASan
  spec/unit/script_spec.lua         # drives luaop children only; runs plain and under ASan
  spec/unit/shard_ring_spec.lua     # drives luaop children only; runs plain and under ASan
  spec/unit/supervisor_spec.lua     # drives luaop children only; runs plain and under ASan
  spec/unit/task_spec.lua           # drives luaop children only; runs plain and under ASan
  spec/unit/taskthread_spec.lua     # drives luaop children only; runs plain and under ASan
  spec/unit/tlsserve_spec.lua       # drives luaop children only; runs plain and under ASan
  spec/unit/watchdog_spec.lua       # drives luaop children only; runs plain and under ASan
)

# The unit spec files the ASan pass leaves out: what they measure is the
# shipped allocator's (ASan's keeps freed memory in quarantine, so RSS
# cannot fall with the heap there). Each still runs plain.
asan_skip=(
  spec/unit/gcmem_spec.lua          # RSS falling with the Lua heap (glibc's malloc_trim)
)

# list_but ARRAY SKIPS: every unit spec file (as busted finds them under
# spec/unit: sorted) but those of the array named SKIPS, into the array
# named ARRAY; a name in SKIPS that is no file fails, so the list cannot go
# stale.
list_but() {
  local f skip
  local -n into=$1 skips=$2
  for skip in "${skips[@]}"; do
    [ -f "$skip" ] || { echo "spec/run.sh: $2 names $skip, which is gone" >&2; return 1; }
  done
  into=()
  while IFS= read -r f; do
    for skip in "${skips[@]}"; do [ "$f" = "$skip" ] && continue 2; done
    into+=("$f")
  done < <(find spec/unit -name '*_spec.lua' | LC_ALL=C sort)
}
valgrind_specs() { list_but valgrind_unit valgrind_skip; }

# Each fuzz harness replays its checked-in corpus (fuzz/corpus/NAME, every
# crash found so far among it) and then runs FUZZ_SMOKE seconds of new
# inputs; a finding fails it. `make fuzz` runs them for longer.
run_fuzz() {
  local f n=0 tmp secs
  echo "== fuzz harnesses: their corpora, then ${FUZZ_SMOKE:-10} s each (api: ${FUZZ_API_TIME:-60} s)"
  : >"$out/fuzz.tap"
  for f in $(cd fuzz && ls -- *.c | sed 's/\.c$//'); do
    n=$((n + 1))
    tmp=$(mktemp -d)
    # the api harness runs whole programs (tens of executions a second):
    # a time of its own, and programs of any length from the start (its
    # bytes are choices: a few make an empty program)
    secs=${FUZZ_SMOKE:-10} opts=
    [ "$f" = api ] && secs=${FUZZ_API_TIME:-60} opts=-len_control=0
    if build/fuzz/$f -max_total_time="$secs" -timeout=60 $opts -dict=fuzz/$f.dict -artifact_prefix="$out/fuzz-$f-" \
        "$tmp" fuzz/corpus/$f >"$out/fuzz-$f.log" 2>&1; then
      echo "ok $n - fuzz $f: its corpus and new inputs, no finding" | tee -a "$out/fuzz.tap"
      echo "# $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$out/fuzz-$f.log")" | tee -a "$out/fuzz.tap"
    else
      tail -n 30 "$out/fuzz-$f.log"
      echo "not ok $n - fuzz $f: a finding or no harness ($out/fuzz-$f.log)" | tee -a "$out/fuzz.tap"
      status=1
    fi
    rm -rf "$tmp"
  done
  echo "1..$n" >>"$out/fuzz.tap"
}

# Every mutant of hack/mutants/ still applies to the tree and names guards
# its killer files hold (hack/mutants.sh --check: seconds, no build), so a
# change cannot leave a mutant stale until its next full run.
run_mutants_check() {
  echo "== hack/mutants.sh --check"
  hack/mutants.sh --check | tee "$out/mutants.tap"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
}

if [ "$mode" = unit ] || [ "$mode" = all ]; then
  run_luacheck
  run_mutants_check
  # (busted takes spec/unit's files in this order too)
  unit_files=()
  while IFS= read -r f; do unit_files+=("$f"); done < <(find spec/unit -name '*_spec.lua' | LC_ALL=C sort)
  plain_lua=("$lua")
  echo "== unit: spec/unit"
  run_pool unit "${SPEC_JOBS:-4}" plain_lua unit_files || status=1
  cat "$out/unit.tap"
  run_fuzz
  # the spec runner itself is not checked for leaks (Lua's own exit); the
  # luaop processes it starts are (proc.lua sets their options)
  # (Lua itself under ASan too: build/asan/bin/lua)
  if list_but asan_unit asan_skip; then
    echo "== spec/unit under asan: ${#asan_unit[@]} spec files (not the ${#asan_skip[@]} of asan_skip)"
    run_memcheck asan "${SPEC_JOBS_ASAN:-3}" asan_unit env ASAN_OPTIONS=detect_leaks=0 \
      LUAOP_SPEC_CPATH=./build/asan/lua/?.so LUAOP_BIN=build/asan/luaop build/asan/bin/lua
  else
    fail_step "unit specs run clean under asan (spec/run.sh's asan_skip names a file that is gone)" asan
  fi
  if valgrind_specs; then
    echo "== spec/unit under valgrind: ${#valgrind_unit[@]} spec files (not the ${#valgrind_skip[@]} of valgrind_skip)"
    # (the kit's wall deadline per test, 30 s, is for hangs; valgrind runs
    # the kit 20 to 50 times slower, so its tests get 300 s)
    run_memcheck valgrind "${SPEC_JOBS_VALGRIND:-2}" valgrind_unit env LUAOP_TEST_TIMEOUT=300s valgrind --quiet --error-exitcode=99 --leak-check=full \
      --errors-for-leak-kinds=definite "$lua"
  else
    fail_step "unit specs run clean under valgrind (spec/run.sh's valgrind_skip names a file that is gone)" valgrind
  fi
fi

# Whether this machine can build and run images; prints why not.
can_image() {
  [ "$(id -u)" = 0 ] || { echo "building images needs root here"; return 1; }
  command -v buildah >/dev/null && command -v runc >/dev/null && command -v debootstrap >/dev/null ||
    { echo "buildah, runc or debootstrap is missing (hack/deps.sh image)"; return 1; }
}

image_suite=""
incluster_suite=""
case $mode in
  image) image_suite=1 ;;
  incluster) incluster_suite=1 ;;
  all)
    if why=$(can_image); then
      image_suite=1
      incluster_suite=1
    else
      echo "== spec/image and spec/incluster skipped: $why"
      echo "ok 1 - # SKIP spec/image: $why" >"$out/image.tap"
      echo "ok 1 - # SKIP spec/incluster: $why" >"$out/incluster.tap"
    fi
    ;;
esac

# Whether the machine is as it was before the control plane came up.
check_left_behind() {
  local after
  after=$(spec/support/machine-state.sh)
  if [ "$after" = "$1" ]; then
    echo "ok 1 - make cluster-down left nothing of the control plane or its real node behind" | tee "$out/cluster-down.tap"
  else
    diff <(echo "$1") <(echo "$after") | head -n 40
    echo "not ok 1 - make cluster-down left nothing of the control plane or its real node behind (the difference above)" |
      tee "$out/cluster-down.tap"
    status=1
  fi
  echo "1..1" >>"$out/cluster-down.tap"
}

if [ "$mode" = e2e ] || [ "$mode" = all ] || [ "$mode" = image ] || [ "$mode" = incluster ]; then
  started=""
  if ! hack/cluster.sh status 2>/dev/null; then
    machine_before=$(spec/support/machine-state.sh)
    start=$SECONDS
    if hack/cluster.sh up; then
      started=1
      echo "== the local control plane and its real node came up in $((SECONDS - start)) s"
    else
      fail_step "the local control plane came up (make cluster-up)" e2e
    fi
  fi
  if [ ! -f "$out/e2e.tap" ]; then
    eval "$(hack/cluster.sh env)"
    export KUBECONFIG KUBECTL K8S_BIN KWOK_BIN
    # kubectl's discovery cache of this run's own (by default it is the
    # user's, kept for hours across control planes on the same port: a
    # kind a spec's CRD served in an earlier run can still be named there)
    export KUBECACHEDIR="$root/$out/kubectl-cache"
    rm -rf "$KUBECACHEDIR"
    if [ "$mode" = e2e ] || [ "$mode" = all ]; then
      run_suite e2e
      LUAOP_BIN=build/asan/luaop run_suite e2e-asan "${asan_e2e[@]}"
    fi
    [ -z "$image_suite" ] || run_suite image
    if [ -n "$incluster_suite" ]; then
      if "$KUBECTL" --kubeconfig "$KUBECONFIG" get node luaop-node >/dev/null 2>&1; then
        start=$SECONDS
        run_suite incluster
        echo "== spec/incluster took $((SECONDS - start)) s"
      elif why=$(hack/node.sh supported 2>&1); then
        fail_step "spec/incluster: the control plane has no real node luaop-node (it was started with LUAOP_NODE=0?)" incluster
      else
        echo "== spec/incluster skipped: ${why#node: }"
        echo "ok 1 - # SKIP spec/incluster: ${why#node: }" >"$out/incluster.tap"
      fi
    fi
  fi
  if [ -z "$started" ] && [ "$mode" = all ]; then
    echo "ok 1 - # SKIP cluster-down: the control plane was up before this run and stays up" >"$out/cluster-down.tap"
  fi
  if [ -n "$started" ]; then
    if hack/cluster.sh down; then
      check_left_behind "$machine_before"
    else
      fail_step "the local control plane went down (make cluster-down)" e2e-down
    fi
  fi
fi

# Every promise of docs/guarantees.md was proven by a spec of this run.
if [ "$mode" = all ]; then
  echo "== docs/guarantees.md"
  if ! spec/guarantees.sh; then
    status=1
    grep -q '^not ok' "$out/guarantees.tap" 2>/dev/null || fail_step "docs/guarantees.md was checked (spec/guarantees.sh)" guarantees
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

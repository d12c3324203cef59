#!/usr/bin/env bash
# hack/mutants.sh [PATCH...] - are the specs able to fail? Each patch in
# hack/mutants/ (default: all of them) breaks one guarantee in a few lines.
# For each, in a scratch copy of the tree (the build outputs copied with
# their times, so only what the patch touches is rebuilt): apply it, build,
# run the spec files its header names as its killers, then its control (an
# unrelated spec file). It is killed when the killers fail and the control
# still passes; a patch that does not apply or does not build is not killed.
#
# A patch's header:
#   # breaks: what it breaks
#   # killers: spec files that must fail (space-separated)
#   # control: a spec file that must still pass
#   # mode: plain (the shipped binary and core) or asan (the ASan/UBSan
#   #       build, as spec/run.sh's sanitizer pass runs them)
#
# The e2e killers run against the local control plane (brought up if it is
# down, and then taken down again at the end). Not part of make test: a few minutes per mutant.
# Prints one line per mutant and "N killed, N survived"; exits 1 if any
# survived.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf 'mutants: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

patches=("$@")
((${#patches[@]})) || patches=(hack/mutants/*.patch)

make all asan >/dev/null || die "the unmutated tree does not build (make all asan)"
# Up only when a killer is an e2e spec, and down again at the end when it
# was this script that brought it up: a control plane and real node left
# running collide with the next one started on the machine (a clean
# clone's make test refused to start its node, and failed, that way).
started_cluster=
if grep -q '^# killers:.*spec/e2e/' "${patches[@]}"; then
  if ! hack/cluster.sh status >/dev/null 2>&1; then
    hack/cluster.sh up >/dev/null 2>&1 || die "the local control plane did not come up (make cluster-up)"
    started_cluster=1
  fi
  eval "$(hack/cluster.sh env)"
  export KUBECONFIG KUBECTL K8S_BIN KWOK_BIN
fi

busted_bin=$(command -v busted) || die "busted is missing; run 'hack/deps.sh test'"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; [ -z "$started_cluster" ] || hack/cluster.sh down >/dev/null 2>&1' EXIT
out="$root/build/mutants"
mkdir -p "$out"

# specs FILES...: run them in the scratch tree with the mode's environment
specs() {
  local mode=$1
  shift
  (
    cd "$scratch/tree" || exit 2
    if [ "$mode" = asan ]; then
      export LUAOP_BIN=build/asan/luaop
      # unit specs load the sanitized core into the runner, as spec/run.sh's
      # ASan pass does; e2e specs (whose runner starts kubectl, hack/ scripts
      # and pgrep) only run luaop sanitized, as its e2e-asan pass does
      case "$*" in
        *spec/e2e/*) ;;
        *)
          export LD_PRELOAD ASAN_OPTIONS=detect_leaks=0 LUAOP_SPEC_CPATH='./build/asan/lua/?.so'
          LD_PRELOAD=$(cc -print-file-name=libasan.so)
          ;;
      esac
    fi
    timeout 900 build/bin/lua "$busted_bin" --output=TAP "$@"
  )
}

killed=0 survived=0
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  breaks=$(sed -n 's/^# breaks: //p' "$p")
  killers=$(sed -n 's/^# killers: //p' "$p")
  control=$(sed -n 's/^# control: //p' "$p")
  mode=$(sed -n 's/^# mode: //p' "$p")
  [ -n "$killers" ] && [ -n "$control" ] || die "$p: no '# killers:' or '# control:' line"
  rm -rf "$scratch/tree" && mkdir -p "$scratch/tree/build"
  git ls-files -z | xargs -0 cp -a --parents -t "$scratch/tree" || die "could not copy the tree"
  for b in obj asan pic gen lua luaop libs libs.stamp; do
    [ -e "build/$b" ] && cp -a "build/$b" "$scratch/tree/build/"
  done
  verdict=""
  case $p in /*) abs=$p ;; *) abs=$root/$p ;; esac
  if ! (cd "$scratch/tree" && git apply "$abs") >"$out/$name.log" 2>&1; then
    verdict="survived (the patch does not apply)"
  elif ! (cd "$scratch/tree" && make all asan) >>"$out/$name.log" 2>&1; then
    verdict="survived (does not build)"
  else
    # shellcheck disable=SC2086
    specs "$mode" $killers >>"$out/$name.log" 2>&1
    krc=$?
    specs "$mode" "$control" >>"$out/$name.log" 2>&1
    crc=$?
    if [ "$krc" = 0 ]; then
      verdict="survived (its killers passed)"
    elif [ "$crc" != 0 ]; then
      verdict="survived (the control failed too: the tree is broken, not the guarantee)"
    else
      verdict="killed by $(grep -m1 '^not ok' "$out/$name.log" | cut -c1-120)"
    fi
  fi
  case $verdict in
    killed*) killed=$((killed + 1)) ;;
    *) survived=$((survived + 1)) ;;
  esac
  printf '%-30s %s\n    %s\n' "$name" "$breaks" "$verdict"
done
echo "$killed killed, $survived survived (logs in build/mutants/)"
[ "$survived" = 0 ]

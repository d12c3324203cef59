#!/usr/bin/env bash
# hack/mutants.sh [--check | --sample SECONDS] [PATCH...] - are the specs
# able to fail? Each patch in hack/mutants/ (default: all of them) breaks one
# guarantee with a small change a plausible bug would make.
#
#   hack/mutants.sh [PATCH...]   run them: for each, in a scratch copy of the
#       tree (the build outputs copied with their times, so only what the
#       patch touches is rebuilt), apply it, build, and run its killer files.
#       The same files run once on the unmutated copy: the control. A mutant
#       is killed only when one of its guards (spec titles, exact) fails in
#       its run and passed in the control's; a run cut by its timeout (a
#       hang) or that died (a crash, a sanitizer's report) kills it when a
#       guard passed in the control and never ended in the mutant's.
#       Anything else survives: a patch that does not apply or does not
#       build, guards that pass, a guard the control failed too or never
#       printed (a spec renamed). A run of every patch on a clean tree
#       writes its result into docs/guarantees.md (the line between
#       "<!-- mutants -->" and "<!-- /mutants -->").
#   hack/mutants.sh --check      in seconds, with no build: every patch has
#       its header, names killer files that exist and guards found in them,
#       has a row in docs/guarantees.md, and still applies to the tree. One
#       TAP line per patch (make test runs it: a stale patch fails the run).
#   hack/mutants.sh --sample SECONDS   CI: the patches in an order rotated by
#       HEAD's commit hash, run one after another while SECONDS last (a run
#       cut by them is not counted), so that every mutant runs over a few
#       commits.
#
# A patch's header:
#   # breaks: what it breaks
#   # killers: spec files to run (space-separated)
#   # guard: the exact title (describe and it, as busted's TAP prints it) of
#   #        a spec that must fail; one line per guard, one at least
#   # mode: plain (the shipped binary and core) or asan (the ASan/UBSan
#   #       build, as spec/run.sh's sanitizer pass runs them)
#
# The e2e killers run against the local control plane (brought up without a
# real node if it is down, and then taken down again at the end). Prints one
# line per mutant and "N killed, N survived"; exits 1 if any survived.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf 'mutants: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

action=run budget=0
case ${1:-} in
  --check) action=check; shift ;;
  --sample) action=sample; budget=${2:?--sample SECONDS}; shift 2 ;;
  -*) die "unknown option $1" ;;
esac
patches=("$@")
((${#patches[@]})) || patches=(hack/mutants/*.patch)
all_patches=$((${#patches[@]} == $(ls hack/mutants/*.patch | wc -l)))

header() { sed -n "s/^# $1: //p" "$2"; }

# --check: headers, killer files, guards present in them, a row, and the
# patch applies: a spec renamed leaves its mutant stale.
if [ "$action" = check ]; then
  n=0 bad=0 tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for p in "${patches[@]}"; do
    n=$((n + 1))
    name=$(basename "$p" .patch) why=""
    killers=$(header killers "$p")
    mode=$(header mode "$p")
    [ -n "$(header breaks "$p")" ] || why="no '# breaks:' line"
    [ -n "$killers" ] || why="no '# killers:' line"
    [ "$mode" = plain ] || [ "$mode" = asan ] || why="its mode is '$mode', not plain or asan"
    [ -n "$(header guard "$p")" ] || why="no '# guard:' line"
    for k in $killers; do [ -f "$k" ] || why="its killer $k is gone"; done
    if [ -z "$why" ]; then
      # the killers' text, a title split over lines ("..." ..\n "...") joined
      # shellcheck disable=SC2086
      cat $killers | perl -0pe 's/(["\x27])\s*\.\.\s*\1//g' >"$tmp/killers"
      while IFS= read -r g; do
        # a tail of the title (its it-part, the describe dropped) longer
        # than a third of it, found in the killers where a string starts
        found="" words=$g
        while [ $((${#words} * 3)) -gt "${#g}" ]; do
          grep -qF -e "\"$words" -e "'$words" "$tmp/killers" && { found=1; break; }
          case $words in *" "*) words=${words#* } ;; *) break ;; esac
        done
        [ -n "$found" ] || { why="its guard is in none of its killers: $g"; break; }
      done < <(header guard "$p")
    fi
    [ -n "$why" ] || grep -qF -- "| \`$name\` |" docs/guarantees.md || why="it has no row in docs/guarantees.md's Mutants"
    [ -n "$why" ] || git apply --check "$p" 2>"$tmp/apply" || why="it no longer applies to the tree (git apply --check $p: $(head -c 300 "$tmp/apply"))"
    if [ -z "$why" ]; then
      echo "ok $n - mutant $name still applies and names guards that exist"
    else
      echo "not ok $n - mutant $name still applies and names guards that exist: $why"
      bad=$((bad + 1))
    fi
  done
  echo "1..$n"
  [ "$bad" = 0 ]
  exit
fi

# --sample: rotate the list by HEAD's hash
if [ "$action" = sample ]; then
  count=${#patches[@]}
  start=$(( 16#$(git rev-parse --short=7 HEAD) % count ))
  patches=("${patches[@]:start}" "${patches[@]:0:start}")
  all_patches=0
fi
t0=$SECONDS
# seconds left of --sample's budget (a large number otherwise)
left() { if [ "$budget" = 0 ]; then echo 100000; else echo $((budget - (SECONDS - t0))); fi; }

make all asan >/dev/null || die "the unmutated tree does not build (make all asan)"
busted_bin=$(command -v busted) || die "busted is missing; run 'hack/deps.sh test'"
scratch=$(mktemp -d)
started_cluster=
trap 'rm -rf "$scratch"; [ -z "$started_cluster" ] || hack/cluster.sh down >/dev/null 2>&1' EXIT
out="$root/build/mutants"
mkdir -p "$out"

# The unmutated tree, copied once: each mutant starts from this copy, and
# the controls run in it (what the working tree becomes meanwhile does not
# matter).
mkdir -p "$scratch/base/build"
git ls-files -z | xargs -0 cp -a --parents -t "$scratch/base" || die "could not copy the tree"
for b in obj asan pic gen lua luaop libs libs.stamp bin; do
  [ -e "build/$b" ] && cp -a "build/$b" "$scratch/base/build/"
done
# the local control plane is the tree's own: the copies' hack/cluster.sh
# (compact, restart-apiserver) must find this one's
ln -s "$root/build/cluster" "$scratch/base/build/cluster"
clean_tree=$([ -z "$(git status --porcelain -- lua src spec hack/mutants)" ] && echo 1)
commit=$(git rev-parse --short HEAD)

cluster_up() {
  [ -z "${KUBECONFIG_UP:-}" ] || return 0
  if ! hack/cluster.sh status >/dev/null 2>&1; then
    LUAOP_NODE=0 hack/cluster.sh up >/dev/null 2>&1 || die "the local control plane did not come up (make cluster-up)"
    started_cluster=1
  fi
  eval "$(hack/cluster.sh env)"
  export KUBECONFIG KUBECTL K8S_BIN KWOK_BIN
  KUBECONFIG_UP=1
}

# specs DIR MODE FILES...: run them in DIR with the mode's environment, TAP
# on stdout, for at most what is left of the budget (900 s at most)
specs() {
  local dir=$1 mode=$2 limit
  shift 2
  limit=$(left)
  ((limit > 900)) && limit=900
  ((limit > 0)) || return 124
  (
    cd "$dir" || exit 2
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
    timeout "$limit" build/bin/lua "$busted_bin" --output=TAP "$@"
  )
}

# result TAPFILE TITLE: ok, not ok, or none
result() {
  if grep -qxF -- "$2" <(sed -n 's/^ok [0-9]* - //p' "$1"); then echo ok
  elif grep -qxF -- "$2" <(sed -n 's/^not ok [0-9]* - //p' "$1"); then echo "not ok"
  else echo none; fi
}

declare -A control_rc
killed=0 survived=0 unfinished=0
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  breaks=$(header breaks "$p")
  killers=$(header killers "$p")
  mode=$(header mode "$p")
  mapfile -t guards < <(header guard "$p")
  [ -n "$killers" ] && ((${#guards[@]})) || die "$p: no '# killers:' or '# guard:' line"
  if (($(left) <= 0)); then
    log "out of time: $name and what follows were not run"
    break
  fi
  case $killers in *spec/e2e/*) cluster_up ;; esac
  # the control: these files on the unmutated tree, once per mode and files
  key="$mode $killers"
  ctap="$out/control-$(printf '%s' "$key" | cksum | cut -d' ' -f1).tap"
  if [ -z "${control_rc[$key]:-}" ]; then
    # shellcheck disable=SC2086
    specs "$scratch/base" "$mode" $killers >"$ctap" 2>&1
    control_rc[$key]=$?
  fi
  if [ "${control_rc[$key]}" = 124 ] && (($(left) <= 0)); then
    unset "control_rc[$key]"
    log "out of time during the control of $name: not counted"
    unfinished=$((unfinished + 1))
    break
  fi
  rm -rf "$scratch/tree" && cp -a "$scratch/base" "$scratch/tree"
  verdict=""
  case $p in /*) abs=$p ;; *) abs=$root/$p ;; esac
  if ! (cd "$scratch/tree" && git apply "$abs") >"$out/$name.log" 2>&1; then
    verdict="survived (the patch does not apply)"
  elif ! (cd "$scratch/tree" && make all asan) >>"$out/$name.log" 2>&1; then
    verdict="survived (does not build)"
  else
    mtap="$out/$name.tap"
    # shellcheck disable=SC2086
    specs "$scratch/tree" "$mode" $killers >"$mtap" 2>&1
    mrc=$?
    cat "$mtap" >>"$out/$name.log"
    if [ "$mrc" = 124 ] && (($(left) <= 0)); then
      log "out of time during $name: not counted"
      unfinished=$((unfinished + 1))
      break
    fi
    # killed by any guard that passed in the control and not in the mutant's
    # run; else survived, saying why for the first guard
    why=""
    for g in "${guards[@]}"; do
      c=$(result "$ctap" "$g") m=$(result "$mtap" "$g")
      if [ "$c" = none ]; then
        why=${why:-"the control never ran its guard: renamed? '$g'"}
      elif [ "$c" != ok ]; then
        why=${why:-"the control failed its guard too: '$g'"}
      elif [ "$m" = "not ok" ]; then
        verdict="killed by '$g'"
        break
      elif [ "$m" = none ] && [ "$mrc" = 124 ]; then
        verdict="killed by a hang before '$g' ended"
        break
      elif [ "$m" = none ] && [ "$mrc" != 0 ]; then
        verdict="killed by a crash before '$g' ended (exit $mrc)"
        break
      fi
    done
    [ -n "$verdict" ] || verdict="survived (${why:-its guards passed})"
  fi
  case $verdict in
    killed*) killed=$((killed + 1)) ;;
    *) survived=$((survived + 1)) ;;
  esac
  printf '%-30s %s\n    %s\n' "$name" "$breaks" "$verdict" | cut -c1-400
done
echo "$killed killed, $survived survived (logs in build/mutants/)"

# a full run on a clean tree is recorded in docs/guarantees.md
if [ "$action" = run ] && [ "$all_patches" = 1 ] && [ -n "$clean_tree" ] && [ "$unfinished" = 0 ]; then
  line="Mutants last run in full on $(date -u +%F) at $commit: $killed killed, $survived survived, of $((killed + survived)) (\`hack/mutants.sh\`)."
  sed -i "s|^<!-- mutants -->.*<!-- /mutants -->\$|<!-- mutants -->$line<!-- /mutants -->|" docs/guarantees.md
  log "docs/guarantees.md: $line"
fi
[ "$survived" = 0 ]

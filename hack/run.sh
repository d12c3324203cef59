#!/usr/bin/env bash
# hack/run.sh - what `make run` does once luaop is built: bring up the local
# control plane, install the CRDs, start luaop with the four operators of
# operators/ against it, apply the samples, and show their reconciled state
# as it changes until Ctrl-C. luaop's log goes to build/run/luaop.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

hack/cluster.sh up
eval "$(hack/cluster.sh env)"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

die() { echo "run: $*" >&2; exit 1; }
kc apply -k manifests/crds >/dev/null || die "could not install the CRDs of manifests/crds (kubectl's error above)"
kc wait --for condition=Established crd --all --timeout=60s >/dev/null ||
  die "the CRDs of manifests/crds were not Established within 60 s"

mkdir -p build/run
log=build/run/luaop.log
build/luaop --kubeconfig "$KUBECONFIG" --script operators/ 2>"$log" &
pid=$!
# Ctrl-C (or a SIGINT or SIGTERM to this script) stops luaop and ends with status 0; any other exit
# stops it too, keeping the status.
stop() {
  trap - INT TERM EXIT
  local status=0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || status=$?
  echo
  echo "luaop stopped with status $status (its log: $log). The control plane is still up:"
  echo "  export KUBECONFIG=$KUBECONFIG; build/bin/kubectl get ats,machines,switches -A"
  echo "  make cluster-down   # to stop it"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
deadline=$((SECONDS + 60))
until grep -q "caches synced" "$log"; do
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; die "luaop exited"; }
  [ "$SECONDS" -lt "$deadline" ] || { tail -n 20 "$log" >&2; die "luaop's caches did not sync within 60 s (its log: $log)"; }
  sleep 0.1
done
# the At sample runs a minute from now, so PENDING -> RUNNING -> DONE shows
sed "s/2026-01-01T00:00:00Z/$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%SZ)/" manifests/samples/at.yaml | kc apply -f - >/dev/null ||
  die "could not apply the At sample"
kc apply -f manifests/samples/machine.yaml -f manifests/samples/secret.yaml -f manifests/samples/switch.yaml >/dev/null ||
  die "could not apply the samples of manifests/samples"

show() {
  echo "luaop $(build/luaop --version | head -1 | cut -d' ' -f2), pid $pid, running operators/*.lua against $(kc config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  echo "$(date -u +%H:%M:%S)  Ctrl-C to stop; log: $log; try: build/bin/kubectl --kubeconfig $KUBECONFIG patch switch <name> --type=merge -p '{\"spec\":{\"position\":\"up\"}}'"
  echo
  kc get ats -A 2>&1
  echo
  kc get machines,switches -A 2>&1
  echo
  echo "copied secrets:"
  kc get secrets -A -l secretsync.k8s.ziwon.dev/source 2>&1
  echo
  echo "recent log:"
  tail -n 6 "$log" | cut -c1-160
}
# The display runs as a job of its own (job control: its own process group,
# in the terminal's foreground), so that Ctrl-C interrupts it alone, not make
# and this script, which then stop luaop and end with status 0. It ends with
# status 3 when luaop exited by itself. (A SIGTERM to this script waits for
# the display to end: bash runs a trap once its foreground job is done.)
set -m
rc=0
(
  trap - INT TERM EXIT
  set +e # a kubectl that fails (the API server restarting) shows its error, and the display goes on
  while kill -0 "$pid" 2>/dev/null; do
    out=$(show)
    if [ -t 1 ]; then clear 2>/dev/null; fi
    echo "$out"
    [ -t 1 ] || echo "----"
    sleep 2
  done
  exit 3
) || rc=$?
set +m
case $rc in
  130 | 0) # Ctrl-C
    stop
    exit 0
    ;;
  3) ;;
  *)
    stop
    die "the display ended with status $rc"
    ;;
esac
echo "run: luaop exited; its log:" >&2
tail -n 20 "$log" >&2
exit 1

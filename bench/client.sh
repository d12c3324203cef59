#!/usr/bin/env bash
# bench/client.sh [N]: the client's request throughput against the curl
# command line, in one run against the local control plane (make cluster-up).
#
# N sequential and N concurrent GETs of one ConfigMap, and N sequential and N
# concurrent creates of ConfigMaps, each through `luaop --script
# bench/client.lua` and through curl with the same TLS client certificate
# (one curl process per measure: sequential requests reuse its connection,
# concurrent ones go with --parallel over HTTP/2). Prints each time and the
# ratio luaop / curl (below 1: luaop is faster). No client-side rate limit.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}

hack/cluster.sh status >/dev/null 2>&1 || { echo "bench: run 'make cluster-up' first" >&2; exit 1; }
[ -x build/luaop ] || { echo "bench: run 'make' first" >&2; exit 1; }
eval "$(hack/cluster.sh env)"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
server=$(kc config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kc config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
cert=$(kc config view --minify -o jsonpath='{.users[0].user.client-certificate}')
key=$(kc config view --minify -o jsonpath='{.users[0].user.client-key}')

ns_luaop=bench-luaop-$$
ns_curl=bench-curl-$$
tmp=$(mktemp -d)
cleanup() {
  kc delete namespace "$ns_luaop" "$ns_curl" --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
kc create namespace "$ns_luaop" >/dev/null
kc create namespace "$ns_curl" >/dev/null
kc create configmap target -n "$ns_curl" --from-literal=k=v >/dev/null

now() { date +%s.%N; }
declare -A curl_t luaop_t

# luaop
while read -r name secs; do luaop_t[$name]=$secs; done < <(
  build/luaop --kubeconfig "$KUBECONFIG" --qps 0 --script bench/client.lua -- "$ns_luaop" "$n")

# curl: a config file per measure
base="$server/api/v1/namespaces/$ns_curl/configmaps"
common=(--no-progress-meter --show-error --fail --http2 --cacert "$ca" --cert "$cert" --key "$key")
# Every URL gets its own output; `next` (between POSTs) resets all options.
for i in $(seq 1 "$n"); do printf 'url = "%s/target"\noutput = "/dev/null"\n' "$base"; done >"$tmp/get.cfg"
for kind in seq conc; do
  for i in $(seq 1 "$n"); do
    [ "$i" -gt 1 ] && echo "next"
    printf 'url = "%s"\noutput = "/dev/null"\n' "$base"
    printf 'cacert = "%s"\ncert = "%s"\nkey = "%s"\nno-progress-meter\nshow-error\nfail\nhttp2\n' "$ca" "$cert" "$key"
    echo 'header = "Content-Type: application/json"'
    printf 'data = "{\\"apiVersion\\":\\"v1\\",\\"kind\\":\\"ConfigMap\\",\\"metadata\\":{\\"name\\":\\"curl-%s-%d\\"},\\"data\\":{\\"k\\":\\"v\\"}}"\n' "$kind" "$i"
  done >"$tmp/create-$kind.full.cfg"
done

t0=$(now); curl "${common[@]}" -K "$tmp/get.cfg"; t1=$(now)
curl_t[get_seq]=$(echo "$t1 - $t0" | bc -l)
t0=$(now); curl "${common[@]}" --parallel --parallel-max 100 -K "$tmp/get.cfg"; t1=$(now)
curl_t[get_conc]=$(echo "$t1 - $t0" | bc -l)
t0=$(now); curl -K "$tmp/create-seq.full.cfg"; t1=$(now)
curl_t[create_seq]=$(echo "$t1 - $t0" | bc -l)
t0=$(now); curl --parallel --parallel-max 100 -K "$tmp/create-conc.full.cfg"; t1=$(now)
curl_t[create_conc]=$(echo "$t1 - $t0" | bc -l)

# target, kube-root-ca.crt, and what curl created
created=$(kc get configmaps -n "$ns_curl" --no-headers | wc -l)
[ "$created" -eq $((2 * n + 2)) ] || { echo "bench: curl created $((created - 2)) ConfigMaps, not $((2 * n))" >&2; exit 1; }
created=$(kc get configmaps -n "$ns_luaop" --no-headers | wc -l)
[ "$created" -eq $((2 * n + 2)) ] || { echo "bench: luaop created $((created - 2)) ConfigMaps, not $((2 * n))" >&2; exit 1; }

printf '%-12s %10s %10s %12s %12s %8s\n' measure luaop_s curl_s luaop_req/s curl_req/s ratio
for m in get_seq get_conc create_seq create_conc; do
  l=${luaop_t[$m]} c=${curl_t[$m]}
  printf '%-12s %10.3f %10.3f %12.0f %12.0f %8.2f\n' "$m" "$l" "$c" \
    "$(echo "$n / $l" | bc -l)" "$(echo "$n / $c" | bc -l)" "$(echo "$l / $c" | bc -l)"
done
echo "N=$n; ratio = luaop time / curl time (below 1: luaop faster)"

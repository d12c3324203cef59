#!/usr/bin/env bash
# bench/client.sh [N] [ROUNDS]: the client's request throughput against the
# curl command line, in one run against the local control plane
# (make cluster-up).
#
# N sequential and N concurrent GETs of one ConfigMap, and N sequential and N
# concurrent creates of ConfigMaps, each through `luaop --program
# bench/client.lua` and through curl with the same TLS client certificate
# (one curl process per measure: sequential requests reuse its connection,
# concurrent ones go with --parallel over HTTP/2). luaop and curl take turns,
# ROUNDS times; the medians are compared. Prints the ratio luaop / curl of
# the median times (below 1: luaop is faster). No client-side rate limit.
n=${1:-500}
rounds=${2:-5}
. "$(dirname "$0")/lib.sh" client
server=$(kc config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kc config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
cert=$(kc config view --minify -o jsonpath='{.users[0].user.client-certificate}')
key=$(kc config view --minify -o jsonpath='{.users[0].user.client-key}')
kc create configmap target -n "$ns" --from-literal=k=v >/dev/null

base="$server/api/v1/namespaces/$ns/configmaps"
common=(--no-progress-meter --show-error --fail --http2 --cacert "$ca" --cert "$cert" --key "$key")
# Every URL gets its own output; `next` (between POSTs) resets all options.
for i in $(seq 1 "$n"); do printf 'url = "%s/target"\noutput = "/dev/null"\n' "$base"; done >"$tmp/get.cfg"
creates() { # round kind
  for i in $(seq 1 "$n"); do
    [ "$i" -gt 1 ] && echo "next"
    printf 'url = "%s"\noutput = "/dev/null"\n' "$base"
    printf 'cacert = "%s"\ncert = "%s"\nkey = "%s"\nno-progress-meter\nshow-error\nfail\nhttp2\n' "$ca" "$cert" "$key"
    echo 'header = "Content-Type: application/json"'
    printf 'data = "{\\"apiVersion\\":\\"v1\\",\\"kind\\":\\"ConfigMap\\",\\"metadata\\":{\\"name\\":\\"curl-%s-%s-%d\\"},\\"data\\":{\\"k\\":\\"v\\"}}"\n' "$1" "$2" "$i"
  done
}
timed() { # name command...
  local t0 t1
  t0=$(now)
  "${@:2}"
  t1=$(now)
  echo "$1 $(echo "$t1 - $t0" | bc -l)"
}

for r in $(seq 1 "$rounds"); do
  "$bin" --kubeconfig "$KUBECONFIG" --qps 0 --program bench/client.lua -- "$ns" "$n" "$r" >>"$tmp/luaop.times"
  creates "$r" seq >"$tmp/create-seq.cfg"
  creates "$r" conc >"$tmp/create-conc.cfg"
  {
    timed get_seq curl "${common[@]}" -K "$tmp/get.cfg"
    timed get_conc curl "${common[@]}" --parallel --parallel-max 100 -K "$tmp/get.cfg"
    timed create_seq curl -K "$tmp/create-seq.cfg"
    timed create_conc curl --parallel --parallel-max 100 -K "$tmp/create-conc.cfg"
  } >>"$tmp/curl.times"
done

# target, kube-root-ca.crt, and 2N per round from each
want=$((4 * n * rounds + 2))
created=$(kc get configmaps -n "$ns" --no-headers | wc -l)
[ "$created" -eq "$want" ] || { echo "bench: $created ConfigMaps, not $want: some creates failed" >&2; exit 1; }

median() { grep "^$2 " "$1" | awk '{print $2}' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-12s %10s %10s %12s %12s %8s\n' measure luaop_s curl_s luaop_req/s curl_req/s ratio
for m in get_seq get_conc create_seq create_conc; do
  l=$(median "$tmp/luaop.times" "$m") c=$(median "$tmp/curl.times" "$m")
  printf '%-12s %10.3f %10.3f %12.0f %12.0f %8.2f\n' "$m" "$l" "$c" \
    "$(echo "$n / $l" | bc -l)" "$(echo "$n / $c" | bc -l)" "$(echo "$l / $c" | bc -l)"
done
echo "N=$n, medians of $rounds rounds; ratio = luaop time / curl time (below 1: luaop faster)"

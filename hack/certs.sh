#!/usr/bin/env bash
# hack/certs.sh - a CA and a serving certificate for luaop's webhook server,
# without cert-manager (docs/webhooks.md#deploying-webhooks).
#
#   hack/certs.sh [OPTIONS] DIR
#
# DIR gets what a kubernetes.io/tls Secret mounted as a volume holds, laid
# out as the kubelet lays out a Secret volume: tls.crt (the serving
# certificate), tls.key (its key) and ca.crt (the CA that signed it), each
# a link into DIR/..data, itself a link to a timestamped directory. So DIR
# can be luaop's --webhook-cert-path for a process on this machine, and the
# source of the Secret for a Pod. The CA's key and certificate stay in
# DIR/ca/, never in the pair's directory nor the Secret.
#
# The serving certificate names SERVICE.NAMESPACE.svc and
# SERVICE.NAMESPACE.svc.cluster.local (the API server calling the Service)
# and 127.0.0.1 and localhost (calling a luaop on this machine by URL:
# manifests/webhooks/local). Keys are ECDSA P-256; the CA is valid for ten
# years, the serving certificate for one.
#
# Idempotent: a CA in DIR/ca is kept; a serving certificate that the CA
# signed, names every name above and is valid for 30 days more is kept
# (the files are not touched); otherwise a new one is issued.
#
# Options:
#   --rotate          issue a new serving certificate and key (a new serial)
#                     from the same CA, even if the old one is good
#   --service NAME    the webhook Service (default luaop-webhook-service)
#   --namespace NS    its namespace (default luaop-system)
#   --secret NAME     the Secret the Deployment mounts (default
#                     luaop-webhook-server-cert)
#   --local           print only the caBundle patches (no Secret: for
#                     manifests/webhooks/local and a luaop on this machine)
#   --ca-bundle       print only the CA bundle (ca.crt, base64), nothing else
#
# On stdout (unless --ca-bundle): kubectl commands that put the pair into
# the Secret (server-side apply, so no copy of the key lands in an
# annotation) and set caBundle in luaop-validating-webhook-configuration,
# luaop-mutating-webhook-configuration and the At CRD's conversion webhook,
# to be read or run: `hack/certs.sh DIR | sh` (kubectl is $KUBECTL when
# set; the commands use KUBECONFIG as it is when they run). After
# --rotate only the Secret changes (the CA and so caBundle stay); running
# the commands again does no harm.
#
# The pair is replaced as the kubelet replaces a Secret volume's files: the
# new files are written to a new timestamped directory, then the ..data
# link is renamed over the old one in one step, so a reader (luaop polling
# the files) sees the old pair or the new one, never one of each.
set -euo pipefail

die() { echo "certs: $*" >&2; exit 1; }
say() { echo "certs: $*" >&2; }

service=luaop-webhook-service namespace=luaop-system secret=luaop-webhook-server-cert
rotate="" local_only="" bundle_only="" dir=""
while (($#)); do
  case $1 in
    --rotate) rotate=1 ;;
    --local) local_only=1 ;;
    --ca-bundle) bundle_only=1 ;;
    --service | --namespace | --secret)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --service) service=$2 ;;
        --namespace) namespace=$2 ;;
        --secret) secret=$2 ;;
      esac
      shift
      ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (hack/certs.sh --help)" ;;
    *) [ -z "$dir" ] || die "one DIR only (got $dir and $1)"; dir=$1 ;;
  esac
  shift
done
[ -n "$dir" ] || die "usage: hack/certs.sh [--rotate] [--local] [--ca-bundle] [--service NAME] [--namespace NS] [--secret NAME] DIR"
command -v openssl >/dev/null || die "openssl is missing (hack/deps.sh test)"

names=("DNS:$service.$namespace.svc" "DNS:$service.$namespace.svc.cluster.local" "DNS:localhost" "IP:127.0.0.1")
san=$(IFS=,; echo "${names[*]}")

mkdir -p "$dir/ca"
chmod 700 "$dir/ca"
dir=$(cd "$dir" && pwd)
ca="$dir/ca"

# The CA, once.
if [ ! -s "$ca/ca.key" ] || [ ! -s "$ca/ca.crt" ]; then
  [ -z "$rotate" ] || [ ! -e "$dir/..data" ] || die "--rotate: $ca has no CA (ca.key, ca.crt); without --rotate a new CA is made, and caBundle must be set again"
  tmp=$(mktemp -d "$ca/.new.XXXXXX")
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/ca.key" 2>/dev/null)
  openssl req -x509 -new -key "$tmp/ca.key" -sha256 -days 3650 -subj "/CN=luaop webhook CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" -out "$tmp/ca.crt"
  mv "$tmp/ca.key" "$ca/ca.key"
  mv "$tmp/ca.crt" "$ca/ca.crt"
  rmdir "$tmp"
  say "made a CA in $ca"
fi

# Whether the current pair is good: the CA signed it, it names every name,
# it is valid 30 days more, and the key is the certificate's.
good() {
  [ -s "$dir/tls.crt" ] && [ -s "$dir/tls.key" ] && [ -s "$dir/ca.crt" ] || return 1
  cmp -s "$dir/ca.crt" "$ca/ca.crt" || return 1
  openssl verify -CAfile "$ca/ca.crt" -purpose sslserver "$dir/tls.crt" >/dev/null 2>&1 || return 1
  openssl x509 -in "$dir/tls.crt" -noout -checkend $((30 * 24 * 3600)) >/dev/null || return 1
  local have n
  have=$(openssl x509 -in "$dir/tls.crt" -noout -ext subjectAltName 2>/dev/null | tr -d ' ' | tail -n +2) || return 1
  have=",$(echo "$have" | sed 's/IPAddress:/IP:/g'),"
  for n in "${names[@]}"; do
    case $have in *",$n,"*) ;; *) return 1 ;; esac
  done
  [ "$(openssl pkey -in "$dir/tls.key" -pubout)" = "$(openssl x509 -in "$dir/tls.crt" -noout -pubkey)" ]
}

if [ -n "$rotate" ] || ! good; then
  # a new timestamped directory beside ..data, written in full first
  new=$(mktemp -d "$dir/..$(date -u +%Y_%m_%d_%H_%M_%S).XXXXXX")
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$new/tls.key" 2>/dev/null)
  openssl req -new -key "$new/tls.key" -subj "/CN=$service.$namespace.svc" -out "$new/tls.csr"
  ext="$new/ext.cnf"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth" "subjectAltName=$san" "authorityKeyIdentifier=keyid" >"$ext"
  # a random serial, positive (a leading 1), so each certificate's differs
  openssl x509 -req -in "$new/tls.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -sha256 -days 365 \
    -set_serial "0x1$(openssl rand -hex 15)" -extfile "$ext" -out "$new/tls.crt" 2>/dev/null
  cp "$ca/ca.crt" "$new/ca.crt"
  rm -f "$new/tls.csr" "$ext"
  chmod 755 "$new"
  chmod 644 "$new/tls.crt" "$new/ca.crt"
  chmod 600 "$new/tls.key"
  # the swap: ..data to the new directory in one rename; the files are
  # links through ..data (made once; a plain file from elsewhere is
  # replaced by its link, each in one rename too)
  old=$(readlink "$dir/..data" 2>/dev/null || true)
  ln -s "$(basename "$new")" "$dir/..data_tmp"
  mv -T "$dir/..data_tmp" "$dir/..data"
  for f in tls.crt tls.key ca.crt; do
    if [ "$(readlink "$dir/$f" 2>/dev/null)" != "..data/$f" ]; then
      ln -s "..data/$f" "$dir/.$f.tmp"
      mv -T "$dir/.$f.tmp" "$dir/$f"
    fi
  done
  [ -z "$old" ] || [ "$old" = "$(basename "$new")" ] || rm -rf "${dir:?}/$old"
  say "issued a serving certificate, serial $(openssl x509 -in "$dir/tls.crt" -noout -serial | cut -d= -f2), for ${names[*]}"
else
  say "the serving certificate in $dir is good (serial $(openssl x509 -in "$dir/tls.crt" -noout -serial | cut -d= -f2)); kept"
fi

bundle=$(base64 -w0 <"$ca/ca.crt")
if [ -n "$bundle_only" ]; then
  echo "$bundle"
  exit 0
fi

k=$(printf '%q' "${KUBECTL:-kubectl}")
q() { printf '%q' "$1"; }
patch() { # KIND NAME PATH
  echo "$k patch $1 $2 --type=json -p '[{\"op\":\"add\",\"path\":\"$3\",\"value\":\"$bundle\"}]'"
}
echo "# hack/certs.sh $dir: run these (hack/certs.sh ... | sh) after kubectl apply -k manifests/webhooks${local_only:+/local}"
if [ -z "$local_only" ]; then
  echo "# the serving pair, as the Secret the Deployment mounts (the namespace $namespace must exist)"
  echo "$k -n $(q "$namespace") create secret generic $(q "$secret") --type=kubernetes.io/tls" \
    "--from-file=tls.crt=$(q "$dir/tls.crt") --from-file=tls.key=$(q "$dir/tls.key") --from-file=ca.crt=$(q "$dir/ca.crt")" \
    "--dry-run=client -o yaml | $k apply --server-side --force-conflicts --field-manager=luaop-certs -f -"
fi
echo "# the CA bundle, that the API server trusts luaop's certificate"
patch validatingwebhookconfiguration luaop-validating-webhook-configuration /webhooks/0/clientConfig/caBundle
patch mutatingwebhookconfiguration luaop-mutating-webhook-configuration /webhooks/0/clientConfig/caBundle
patch customresourcedefinition ats.cnat.programming-kubernetes.info /spec/conversion/webhook/clientConfig/caBundle

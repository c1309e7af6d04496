#!/usr/bin/env bash
# Makes a CA and certificates signed by it with openssl, for a cluster's TLS (docs/security.md).
# Idempotent: the CA and each certificate are made once; a certificate whose names changed, or
# that expires within a day, is made again.
#
#   deploy/certs.sh DIR NAME=SANS...
#
# DIR gets ca.crt and ca.key (kept private: 0600) and, for each NAME, NAME.crt and NAME.key;
# SANS is the certificate's subject alternative names as openssl writes them, for example
# "IP:127.64.1.3,DNS:localhost,URI:spiffe://shardps/ps/0". Keys are ECDSA P-256; validity
# $SHARDPS_CERT_DAYS days (30).
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: deploy/certs.sh DIR NAME=SANS..." >&2
  exit 2
fi
dir=$1
shift
days=${SHARDPS_CERT_DAYS:-30}
command -v openssl >/dev/null || { echo "certs.sh: openssl is not installed" >&2; exit 1; }
mkdir -p "$dir"
umask 077

# valid FILE: the certificate exists and is good for another day.
valid() { [ -s "$1" ] && openssl x509 -in "$1" -noout -checkend 86400 >/dev/null 2>&1; }

if ! valid "$dir/ca.crt" || [ ! -s "$dir/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -days "$days" -subj "/CN=shardps-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  chmod 644 "$dir/ca.crt"
fi

for spec in "$@"; do
  name=${spec%%=*}
  sans=${spec#*=}
  if [ -z "$name" ] || [ "$name" = "$spec" ] || [ -z "$sans" ]; then
    echo "certs.sh: \"$spec\" is not NAME=SANS" >&2
    exit 2
  fi
  crt="$dir/$name.crt"
  key="$dir/$name.key"
  # The names it was made for, beside it: a change of address makes it again.
  if valid "$crt" && [ -s "$key" ] && [ "$(cat "$dir/$name.sans" 2>/dev/null)" = "$sans" ] &&
     openssl verify -CAfile "$dir/ca.crt" "$crt" >/dev/null 2>&1; then
    continue
  fi
  printf 'subjectAltName=%s\n' "$sans" >"$dir/$name.ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$key.new" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days "$days" -extfile "$dir/$name.ext" -out "$crt.new" 2>/dev/null
  chmod 644 "$crt.new"
  # Each file replaced whole (a rename); a daemon watching them takes the new pair once both
  # are in place and match (rpc/tls.h).
  mv "$key.new" "$key"
  mv "$crt.new" "$crt"
  printf '%s' "$sans" >"$dir/$name.sans"
  rm -f "$dir/$name.csr" "$dir/$name.ext"
done

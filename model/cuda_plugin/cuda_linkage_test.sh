#!/usr/bin/env bash
# The daemons link no CUDA library (the worker and the evaluator load the CUDA plugin at run
# time, compute/cuda_plugin_loader.h), so that they start in an image without CUDA; the plugin links
# cudart and cuBLAS and exports only its C interface. Checked on the ELF files themselves:
# readelf -d (DT_NEEDED, RUNPATH) and ldd (the libraries the loader would map).
set -uo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE:-shardps}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cuda_libs='lib(cudart|cublas|cublasLt|cuda|cudnn|nvrtc|nvJitLink)\b'

for bin in worker/worker evaluator/evaluator ps_server/ps coordinator/chief \
           coordinator/cli/shardctl; do
  file="$root/$bin"
  [ -x "$file" ] || { fail "$bin: not found at $file"; continue; }
  needed=$(readelf -d "$file" | grep -E '\((NEEDED|RUNPATH|RPATH)\)')
  [ -n "$needed" ] || { fail "$bin: readelf -d shows no NEEDED entry"; continue; }
  if bad=$(grep -E "$cuda_libs|/usr/local/cuda" <<<"$needed"); then
    fail "$bin needs CUDA: $bad"
  fi
  if bad=$(ldd "$file" | grep -E "$cuda_libs"); then
    fail "$bin maps a CUDA library (ldd): $bad"
  fi
  echo "ok: $bin: $(grep -c NEEDED <<<"$needed") NEEDED entries, none of CUDA"
done

plugin="$root/model/cuda_plugin/libshardps_cuda.so"
needed=$(readelf -d "$plugin" | grep -E '\(NEEDED\)')
for lib in libcudart.so libcublas.so; do
  grep -q "\[$lib" <<<"$needed" || fail "the plugin does not need $lib: $needed"
done
# shellcheck disable=SC2016  # $ORIGIN is the literal text readelf prints, not a variable
grep -q 'Library runpath: \[\$ORIGIN' < <(readelf -d "$plugin") ||
  fail "the plugin's RUNPATH does not start with \$ORIGIN: $(readelf -d "$plugin" | grep RUNPATH)"
exported=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort | tr '\n' ' ')
[ "$exported" = "shardps_cuda_abi_version shardps_cuda_device_count shardps_cuda_new_compute shardps_cuda_open_device " ] ||
  fail "the plugin exports more or less than its C interface: $exported"
echo "ok: the plugin needs cudart and cuBLAS and exports: $exported"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"

#!/usr/bin/env bash
# Installs what shardps needs to build, test and run, from Debian 12's packages. Idempotent:
# installs only what is missing, so it is cheap to call before every command.
#
#   deploy/setup.sh [PACKAGE...]   # also these (deploy/python_env.sh --torch: PyTorch)
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-skylib bazel-rules-java
  g++ libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libgtest-dev libgmock-dev nlohmann-json3-dev zlib1g-dev
  iperf3 dataset-fashion-mnist openssl
  python3-dev pybind11-dev
  prometheus-cpp-dev
  "$@"
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    "${missing[@]}" >&2
fi

# promtool alone (metrics/registry_test checks the /metrics format with it), taken out of
# Debian's prometheus package without installing it: installing it would start a Prometheus
# server.
if [ ! -x /usr/bin/promtool ] && [ ! -x /usr/local/bin/promtool ]; then
  echo "setup: installing promtool (from Debian's prometheus package)" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q prometheus >&2 &&
    dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool &&
    $SUDO install -m 0755 usr/bin/promtool /usr/local/bin/promtool)
  rm -rf "$tmp"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: the CUDA toolkit is missing at /usr/local/cuda (nvcc, cuBLAS); shardps'" \
       "GPU backend needs it to build. Install NVIDIA's CUDA toolkit there." >&2
  exit 1
fi

#!/usr/bin/env bash
# Creates, where missing, the Python virtualenv in which shardps' safetensors files are
# checked against the reference implementation (the `safetensors` package from PyPI, with
# numpy), its Kubernetes manifests against Kubernetes' JSON schemas (kubernetes-validate,
# with PyYAML), its TensorBoard event files are read by TensorBoard (the tensorboard package,
# without TensorFlow) and real data sets are converted from parquet (pyarrow, for
# data/movielens/prepare.sh), and prints its path. Idempotent: an existing venv with the
# pinned versions is left as it is; a missing venv is created and missing or other versions
# are installed.
#
#   bazel test //checkpoint:safetensors_python_test --test_env=SHARDPS_VENV=$(deploy/python_env.sh)
#
# With --shardps it also builds shardps' Python package (//python:wheel, for Python 3.11) and
# installs it, so that `import shardps` works in the venv (docs/python.md):
#
#   . "$(deploy/python_env.sh --shardps)/bin/activate" && python -c 'import shardps'
#
# The wheel is reinstalled only when it changed.
# Where: ${SHARDPS_VENV:-$HOME/.cache/shardps/venv}. Which Python: ${PYTHON:-python3}.
#
# With --torch it makes instead the virtualenv for shardps.torch, the examples and their tests:
# Debian's Python 3.11 with its CPU-only PyTorch 1.13 (python3-torch, installed by
# deploy/setup.sh, with OpenBLAS in place of the reference BLAS) and numpy 1.24 seen through
# --system-site-packages, and shardps' wheel.
# PyPI's torch would pull several GB of CUDA wheels into every clean CI run for tests that
# run on the CPU. Where: ${SHARDPS_TORCH_VENV:-$HOME/.cache/shardps/venv-torch}.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

with_shardps=0
with_torch=0
for arg in "$@"; do
  case "$arg" in
    --shardps) with_shardps=1 ;;
    --torch) with_torch=1; with_shardps=1 ;;
    *) echo "python_env: unknown argument $arg (usage: python_env.sh [--shardps] [--torch])" >&2
       exit 2 ;;
  esac
done

venv="${SHARDPS_VENV:-$HOME/.cache/shardps/venv}"
python="${PYTHON:-python3}"
venv_flags=()
if [ "$with_torch" = 0 ] && [ "$with_shardps" = 1 ]; then
  "$root/deploy/setup.sh" python3-venv   # the build of the wheel, and the venv itself
fi
if [ "$with_torch" = 1 ]; then
  "$root/deploy/setup.sh" python3-torch libopenblas0-openmp python3-venv
  venv="${SHARDPS_TORCH_VENV:-$HOME/.cache/shardps/venv-torch}"
  python=/usr/bin/python3
  venv_flags=(--system-site-packages)
fi
# Versions with wheels for CPython 3.10 to 3.13 on x86-64 and arm64 Linux.
# kubernetes-validate 1.31.0 ships the schemas of Kubernetes 1.22 to 1.31; its dependencies are
# pinned too, so that every machine validates with the same code. pyarrow (no dependencies of
# its own) reads the brotli parquet files of data/movielens/prepare.sh. tensorboard reads
# event files without TensorFlow (tests/read_tensorboard.py); its dependencies pinned too.
requirements=(numpy==2.2.6 safetensors==0.5.3 pyarrow==26.0.1
              kubernetes-validate==1.31.0 PyYAML==6.0.2 jsonschema==4.23.0
              jsonschema-specifications==2024.10.1 referencing==0.35.1 rpds-py==0.22.3
              attrs==24.3.0 importlib_resources==6.4.5 packaging==24.2
              typing_extensions==4.12.2
              tensorboard==2.21.0 tensorboard-data-server==0.7.2 absl-py==2.5.1
              grpcio==1.85.3 Markdown==3.11.3 MarkupSafe==3.0.4 pillow==13.0.0
              protobuf==7.36.2 Werkzeug==3.1.9)

# A venv without a working pip (Debian's `python3 -m venv` writes bin/python, then fails
# when python3-venv is missing) is made again, not trusted.
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "python_env: creating $venv with $("$python" --version 2>&1)" >&2
  mkdir -p "$(dirname "$venv")"
  if ! "$python" -m venv --clear "${venv_flags[@]}" "$venv" >&2; then
    echo "python_env: '$python -m venv' failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
fi

# Exit 0 when every pinned package is installed at its version.
pinned_present() {
  "$venv/bin/python" - "${requirements[@]}" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import PackageNotFoundError, version
for requirement in sys.argv[1:]:
    name, wanted = requirement.split("==")
    try:
        if version(name) != wanted:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
}

if [ "$with_torch" = 0 ] && ! pinned_present; then
  echo "python_env: installing ${requirements[*]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}" >&2
  pinned_present || { echo "python_env: ${requirements[*]} did not install" >&2; exit 1; }
fi

if [ "$with_shardps" = 1 ]; then
  (cd "$root" && bazel build //python:wheel >&2)
  wheel=$(cd "$root" && ls "$(bazel info bazel-bin 2>/dev/null)"/python/shardps-*.whl)
  sum=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$(cat "$venv/.shardps-wheel.sha256" 2>/dev/null)" != "$sum" ]; then
    echo "python_env: installing $(basename "$wheel") into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
      --no-deps "$wheel" >&2
    echo "$sum" > "$venv/.shardps-wheel.sha256"
  fi
  "$venv/bin/python" -c 'import shardps' ||
    { echo "python_env: shardps does not import in $venv" >&2; exit 1; }
fi
if [ "$with_torch" = 1 ]; then
  "$venv/bin/python" -c 'import shardps.torch' ||
    { echo "python_env: shardps.torch does not import in $venv" >&2; exit 1; }
fi
echo "$venv"

#!/usr/bin/env bash
# Creates, where missing, the Python virtualenv in which the time-to-accuracy benchmark runs
# TensorFlow's ParameterServerStrategy (tensorflow-cpu and numpy from PyPI), and prints its
# path. Only bench/time_to_accuracy.sh needs it: CI never installs TensorFlow (hundreds of MB),
# and deploy/python_env.sh's small venv stays as it is.
# Idempotent: a venv with the pinned versions is left as it is; a missing one is created
# (Debian's python3-venv is installed with apt-get when `python3 -m venv` lacks it) and missing
# or other versions are installed.
#
#   bench/tf_peer/venv.sh            # prints e.g. /root/.cache/shardps/tf-venv
#   bench/tf_peer/venv.sh --check    # exit 0 when the venv is ready, 1 otherwise; installs nothing
#
# Where: ${SHARDPS_TF_VENV:-$HOME/.cache/shardps/tf-venv}. Which Python: ${PYTHON:-python3}.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail

venv="${SHARDPS_TF_VENV:-$HOME/.cache/shardps/tf-venv}"
python="${PYTHON:-python3}"
# tensorflow-cpu 2.21.0 has wheels for CPython 3.10 to 3.13 on x86-64 Linux; numpy pinned to
# a version it accepts, so that every machine compares against the same TensorFlow.
requirements=(tensorflow-cpu==2.21.0 numpy==2.1.3)

pinned_present() {
  [ -x "$venv/bin/python" ] || return 1
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

if [ "${1:-}" = "--check" ]; then
  pinned_present
  exit $?
fi

# A venv without a working pip (Debian's `python3 -m venv` writes bin/python, then fails when
# python3-venv is missing) is made again, not trusted.
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  if ! "$python" -c 'import ensurepip' >/dev/null 2>&1 && command -v apt-get >/dev/null; then
    echo "tf venv: installing Debian's python3-venv (ensurepip is missing)" >&2
    apt-get install -y -q python3-venv >&2 || { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; }
  fi
  echo "tf venv: creating $venv with $("$python" --version 2>&1)" >&2
  mkdir -p "$(dirname "$venv")"
  if ! "$python" -m venv --clear "$venv" >&2; then
    echo "tf venv: '$python -m venv' failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
fi

if ! pinned_present; then
  echo "tf venv: installing ${requirements[*]} into $venv (a few hundred MB)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}" >&2
  pinned_present || { echo "tf venv: ${requirements[*]} did not install" >&2; exit 1; }
fi
echo "$venv"

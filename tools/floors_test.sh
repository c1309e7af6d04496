#!/usr/bin/env bash
# Runs the floor checker's tests (check_floors_test.py) with the system's python3.
set -euo pipefail
# The scripts are read from the source tree: leave no __pycache__ there.
export PYTHONDONTWRITEBYTECODE=1
exec python3 "${TEST_SRCDIR}/${TEST_WORKSPACE:-shardps}/tools/check_floors_test.py" -v

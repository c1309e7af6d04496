#!/usr/bin/env bash
# transport_bench --tls=both end to end, briefly: a plaintext and a mutual-TLS cluster of 2 ps
# each, the dense section only, one timed repetition, openssl speed for 1 s. Checks that the
# run exits 0, that the TLS on/off table has a row for each dense size and direction with both
# goodput columns and their ratio positive, that the 16/64 MiB rows say met or MISSED against
# the 0.7 target, and that the AES-GCM baseline line is there (or says why it was skipped). A
# bad --tls value exits 2. Speed is never asserted.
set -uo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-shardps}"
bench="$root/bench/transport_bench"
out="${TEST_TMPDIR:?}/transport_bench_tls"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; echo "---- stdout ----" >&2; cat "$out/table.txt" >&2; exit 1; }

"$bench" --tls=both --quick --only=dense --reps=1 --openssl_seconds=1 \
  >"$out/table.txt" 2>"$out/stderr.txt" ||
  { rc=$?; tail -40 "$out/stderr.txt" >&2; fail "transport_bench exited $rc"; }

grep -q "^TLS on vs off: " "$out/table.txt" || fail "no TLS on/off table"
grep -qE "^transfer +off MiB/s +on MiB/s +on/off" "$out/table.txt" || fail "no off/on header"
for dir in pull push; do
  for mib in 1 16 64; do
    # The TLS table's row (the main table's has a unit after its one figure).
    line=$(grep -E "^dense $dir $mib MiB +[0-9.]+ +[0-9.]+ +[0-9.]+ " "$out/table.txt") ||
      fail "no TLS table row for dense $dir $mib MiB"
    # "dense pull 16 MiB   2224.1   1650.3   0.74   >=0.7  met   0.39  1.85"
    read -r off on ratio < <(awk '{print $5, $6, $7}' <<<"$line")
    for v in "$off" "$on" "$ratio"; do
      awk -v x="$v" 'BEGIN { exit !(x + 0 > 0) }' || fail "not a positive figure ($v): $line"
    done
    if [ "$mib" != 1 ]; then
      grep -qE ">=0\.7 +(met|MISSED)" <<<"$line" || fail "no 0.7 target verdict: $line"
    fi
  done
done
# The cipher's limit: measured, or skipped with the reason.
grep -qE "^openssl speed -evp aes-128-gcm .*1 process [0-9]+ MiB/s|^openssl speed: skipped" \
  "$out/table.txt" || fail "no openssl speed line"
# The main table's TLS section carries the same figures as ratios to plaintext.
grep -qE "^dense push 64 MiB, TLS +[0-9.]+ +MiB/s" "$out/table.txt" ||
  fail "no TLS figure in the main table"
grep -q "^host during the run" "$out/table.txt" || fail "no host line"

"$bench" --tls=maybe >/dev/null 2>"$out/bad.txt"
rc=$?
[ "$rc" = 2 ] || fail "--tls=maybe exited $rc, not 2"
grep -q -- "--tls must be off, on or both" "$out/bad.txt" || fail "--tls=maybe: no message"
echo PASS

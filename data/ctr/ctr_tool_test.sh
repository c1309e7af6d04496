#!/bin/bash
# ctr_tool end to end: generate (tsv.gz and ctrbin), convert, stats, and exit 2 naming the
# flag on bad command lines.
set -u
tool=data/ctr/ctr_tool
dir="${TEST_TMPDIR:-/tmp}/ctr_tool_test"
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
spec="synthetic_ctr:examples=500,dense=4,vocab=1000|50,hot=1|1..2,seed=3"

$tool generate --spec="$spec" --out="$dir/a.tsv.gz" || fail "generate tsv.gz"
$tool generate --spec="$spec" --out="$dir/a.ctrbin" --examples=300 || fail "generate ctrbin"
$tool convert --in="$dir/a.tsv.gz" --out="$dir/b.ctrbin" --dense=4 --categorical=2 \
  --max_hotness=2 > "$dir/convert.out" || fail "convert"
grep -q "converted 500 examples" "$dir/convert.out" || fail "convert count: $(cat "$dir/convert.out")"

$tool stats "$dir/a.ctrbin" --sample=300 > "$dir/stats.out" || fail "stats ctrbin"
grep -q "examples: 300" "$dir/stats.out" || fail "stats examples: $(cat "$dir/stats.out")"
grep -q "planted model over 300 examples: AUC 0\.[5-9]" "$dir/stats.out" || fail "planted AUC: $(cat "$dir/stats.out")"
$tool stats "$dir/b.ctrbin" > /dev/null || fail "stats converted"
$tool stats "$spec" --sample=200 | grep -q "planted model over 200" || fail "stats spec"

# Bad lines: fail by default naming the line, counted with --skip_bad_lines.
printf '1\t1\t2\t3\t4\taa\tbb\n1\tx\t2\t3\t4\taa\tbb\n' > "$dir/bad.tsv"
$tool convert --in="$dir/bad.tsv" --out="$dir/bad.ctrbin" --dense=4 --categorical=2 2> "$dir/bad.err"
[ $? -eq 1 ] || fail "bad line exit code"
grep -q "line 2" "$dir/bad.err" || fail "bad line message: $(cat "$dir/bad.err")"
$tool convert --in="$dir/bad.tsv" --out="$dir/bad.ctrbin" --dense=4 --categorical=2 \
  --skip_bad_lines | grep -q "skipped 1 bad lines" || fail "skip count"

# A schema.json (data/movielens/convert.py's) names the features and bounds their ids.
cat > "$dir/schema.json" <<'JSON'
{"num_dense": 4, "categorical": [{"name": "user", "vocab_size": 1000, "max_hotness": 1},
 {"name": "genre", "vocab_size": 50, "max_hotness": 2, "values": []}], "split": "x"}
JSON
$tool convert --in="$dir/a.tsv.gz" --out="$dir/s.ctrbin" --schema="$dir/schema.json" \
  | grep -q "converted 500 examples" || fail "convert with --schema"
$tool stats "$dir/s.ctrbin" | grep -Eq "^genre +50 " || fail "schema names and vocab: $($tool stats "$dir/s.ctrbin")"
# An id beyond a feature's vocabulary is a bad line.
sed 's/"vocab_size": 50,/"vocab_size": 2,/' "$dir/schema.json" > "$dir/small.json"
$tool convert --in="$dir/a.tsv.gz" --out="$dir/t.ctrbin" --schema="$dir/small.json" 2> "$dir/small.err"
[ $? -eq 1 ] || fail "an id out of the schema's vocabulary was accepted"
grep -q "line" "$dir/small.err" || fail "out-of-vocabulary message: $(cat "$dir/small.err")"

# Fixed-size records of one-hot data: label, 4 dense, 2 ids = 36 bytes each.
$tool export --spec="synthetic_ctr:examples=200,dense=4,vocab=1000|50,seed=3" \
  --out="$dir/e.bin" | grep -q "exported 200 examples" || fail "export"
[ "$(stat -c %s "$dir/e.bin")" -eq $((200 * 36)) ] || fail "export size $(stat -c %s "$dir/e.bin")"
grep -q '"record_bytes": 36' "$dir/e.json" || fail "export json: $(cat "$dir/e.json")"
grep -q '"vocab": \[1000, 50\]' "$dir/e.json" || fail "export vocab: $(cat "$dir/e.json")"

expect_usage() {  # expect exit 2 and the fragment in stderr
  local fragment="$1"; shift
  "$@" 2> "$dir/usage.err" > /dev/null
  local rc=$?
  [ $rc -eq 2 ] || fail "$* exited $rc, expected 2"
  grep -q -- "$fragment" "$dir/usage.err" || fail "$*: stderr lacks '$fragment': $(cat "$dir/usage.err")"
}
expect_usage "--out" $tool generate --spec="$spec" --out="$dir/x.csv"
expect_usage "--spec" $tool generate --out="$dir/x.tsv"
expect_usage "vocab" $tool generate --spec="synthetic_ctr:vocab=x" --out="$dir/x.tsv"
expect_usage "--bogus" $tool convert --bogus=1
expect_usage "--examples" $tool generate --spec="$spec" --out="$dir/x.tsv" --examples=abc
expect_usage "unknown command" $tool frobnicate
expect_usage "one-hot" $tool export --spec="$spec" --out="$dir/m.bin"
expect_usage "--dense and --schema" $tool convert --in="$dir/a.tsv.gz" --out="$dir/x.ctrbin" \
  --schema="$dir/schema.json" --dense=4
echo '{"num_dense": 1, "categorical": [{"name": "a"}]}' > "$dir/bad.json"
expect_usage "categorical\[0\].vocab_size" $tool convert --in="$dir/a.tsv.gz" \
  --out="$dir/x.ctrbin" --schema="$dir/bad.json"
echo PASS

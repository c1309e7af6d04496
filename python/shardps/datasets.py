"""Batches and datasets, with numpy.

batch_indices(examples, seed, epoch, batch_index, batch_size): the example indices of a batch,
the ones ``Step.indices`` gives and a C++ worker trains on: each epoch a permutation of
[0, examples) fixed by (seed, epoch), cut in batch_size pieces (the last may be shorter).

The datasets the examples train on, read from the files the tree already uses:

movielens(split): MovieLens-100k as data/movielens/prepare.sh writes it (ratings >= 4 as
clicks, with user and item features), read from $SHARDPS_MOVIELENS_DIR or its default place.
fashion_mnist(split): Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, the
IDX files the C++ workers read): features float32 (N, 784) in [0, 1], labels int64 (N,).
"""

import gzip
import json
import os

import numpy as np

from shardps import _core

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
MOVIELENS_DIR = os.path.join(os.path.expanduser("~"), ".cache", "shardps", "movielens-100k")


def _idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion_mnist(split="train", data_dir=FASHION_MNIST_DIR):
    """(features, labels) of the train or test split."""
    prefix = {"train": "train", "test": "t10k"}[split]
    def find(kind):
        for name in (f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz",
                     f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte"):
            path = os.path.join(data_dir, name)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"no Fashion-MNIST {split} {kind} in {data_dir}")
    images = _idx(find("images"))
    labels = _idx(find("labels"))
    return (images.reshape(len(images), -1).astype(np.float32) / 255.0,
            labels.astype(np.int64))


def batch_indices(examples, seed, epoch, batch_index, batch_size):
    """The int64 example indices of batch ``batch_index`` of ``epoch`` (see the module doc).
    Raises shardps.InvalidArgument / OutOfRange for a bad epoch, size or index."""
    return _core._batch_indices(examples, seed, epoch, batch_index, batch_size)


def movielens(split="train", data_dir=None):
    """MovieLens-100k's train or test split (data/movielens/README.md): a dict of numpy arrays,
    "label" float32 (N,), "dense" float32 (N, 2) (log(1 + x) of user_age and item_age, 0 when
    missing), and per categorical feature (user_id, item_id, genres, gender, age_bucket,
    occupation, zip_prefix, release_year) its ids, int64 (N,) or (N, max_hotness) for a
    multi-hot one, -1 where missing or padded; "vocab": feature -> vocabulary size."""
    data_dir = data_dir or os.environ.get("SHARDPS_MOVIELENS_DIR") or MOVIELENS_DIR
    schema_path = os.path.join(data_dir, "schema.json")
    if not os.path.exists(schema_path):
        raise FileNotFoundError(f"no MovieLens-100k in {data_dir} (make it with "
                                f"data/movielens/prepare.sh, or set SHARDPS_MOVIELENS_DIR)")
    with open(schema_path) as f:
        schema = json.load(f)
    features = schema["categorical"]
    num_dense = schema["num_dense"]
    with open(os.path.join(data_dir, f"{split}.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    n = len(rows)
    out = {"label": np.array([float(r[0]) for r in rows], np.float32)}
    dense = np.zeros((n, num_dense), np.float32)
    for j in range(num_dense):
        for i, r in enumerate(rows):
            if r[1 + j]:
                dense[i, j] = np.log1p(max(int(r[1 + j]), 0))
    out["dense"] = dense
    for k, feature in enumerate(features):
        width = feature["max_hotness"]
        ids = np.full((n, width), -1, np.int64)
        column = 1 + num_dense + k
        for i, r in enumerate(rows):
            if r[column]:
                values = [int(v, 16) for v in r[column].split(",")]
                ids[i, :len(values)] = values
        out[feature["name"]] = ids[:, 0] if width == 1 else ids
    out["vocab"] = {f["name"]: f["vocab_size"] for f in features}
    return out

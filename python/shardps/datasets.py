"""Batches and datasets, with numpy.

batch_indices(examples, seed, epoch, batch_index, batch_size): the example indices of a batch,
the ones ``Step.indices`` gives and a C++ worker trains on: each epoch a permutation of
[0, examples) fixed by (seed, epoch), cut in batch_size pieces (the last may be shorter).

The datasets the examples train on, read from the files the tree already uses:

fashion_mnist(split): Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, the
IDX files the C++ workers read): features float32 (N, 784) in [0, 1], labels int64 (N,).
"""

import gzip
import os

import numpy as np

from shardps import _core

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


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

"""The single-process reference for the sparse model on a CTR TSV data set made by
data/movielens/prepare.sh (MovieLens-100k by default; its adult/ works too): trains, in numpy
alone, the model below on train.tsv and prints its held-out AUC and log loss on test.tsv as
JSON on stdout, next to a logistic regression's, so that the same model trained in shardps
can be compared with it.

    reference.py [--data DIR] [--dim 16] [--hidden 64] [--lr 0.05]
                 [--initial_accumulator 0.1] [--epochs 3] [--batch 256] [--seed 0]

The model ("embeddings + MLP"), float32:
  * one embedding table per categorical feature of schema.json, vocab_size x dim, initialized
    uniform(-0.05, 0.05) (Keras' default for Embedding); a field's ids are summed (sum
    pooling: the multi-hot genres), a missing field is a zero vector;
  * the dense fields as log(1 + max(x, 0)), a missing one as 0, concatenated first, then the
    pooled embeddings in schema order: num_dense + features x dim inputs;
  * one hidden layer of `hidden` ReLU units, then one output unit; kernels Glorot-uniform,
    biases 0 (Keras' defaults); sigmoid, log loss averaged over the batch.
The logistic regression: one weight per categorical id (an embedding of dim 1, summed over
every feature), one per dense input, a bias; all 0 at the start.
Both train with Adagrad as TensorFlow's: acc += g^2; w -= lr * g / (sqrt(acc) + 1e-7), acc
starting at initial_accumulator; an embedding row's gradient is summed over the batch first
and only touched rows move (TensorFlow's sparse apply). Each epoch visits train.tsv in an
order drawn from numpy's default_rng(seed); batches of `batch`, the last one smaller.

Prints {"data":..., "hyperparameters":..., "train": {...}, "test": {...}, "models": {"mlp":
{"auc", "logloss", "per_epoch": [...], "seconds"}, "logistic_regression": {...}}}.
"""
import argparse
import json
import os
import sys
import time

# The matrices are small (batch x ~130 x 64): one BLAS thread is faster than several, which
# spend their time waking each other up (2x the CPU time on 2 busy cores).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402 (after the thread settings, which it reads on import)

EPSILON = 1e-7  # TensorFlow's Adagrad epsilon


def load(path, schema, limit=None):
    """Labels [n], dense inputs [n, num_dense] (log(1 + max(x, 0)), missing 0) and per feature
    an id matrix [n, max_hotness] with -1 for no id."""
    num_dense = schema["num_dense"]
    features = schema["categorical"]
    with open(path) as f:
        lines = f.read().splitlines()
    if limit is not None:
        lines = lines[:limit]
    n = len(lines)
    labels = np.zeros(n, np.float32)
    dense = np.zeros((n, num_dense), np.float32)
    ids = [np.full((n, max(1, feat["max_hotness"])), -1, np.int64) for feat in features]
    expected = 1 + num_dense + len(features)
    for r, line in enumerate(lines):
        fields = line.split("\t")
        if len(fields) != expected:
            sys.exit(f"reference: {path}:{r + 1}: {len(fields)} fields, expected {expected}")
        labels[r] = int(fields[0])
        for d in range(num_dense):
            if fields[1 + d]:
                dense[r, d] = np.log1p(max(int(fields[1 + d]), 0))
        for k in range(len(features)):
            field = fields[1 + num_dense + k]
            if field:
                for h, hex_id in enumerate(field.split(",")):
                    ids[k][r, h] = int(hex_id, 16)
    return labels, dense, ids


def auc(labels, scores):
    """Area under the ROC curve (the Mann-Whitney statistic, ties counted half)."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2.0)[inverse]  # 1-based average ranks
    positives = labels > 0.5
    p, n = positives.sum(), (~positives).sum()
    if p == 0 or n == 0:
        return float("nan")
    return float((ranks[positives].sum() - p * (p + 1) / 2.0) / (p * n))


def logloss(labels, probabilities):
    q = np.clip(probabilities.astype(np.float64), 1e-7, 1 - 1e-7)
    return float(-np.mean(labels * np.log(q) + (1 - labels) * np.log(1 - q)))


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


class Adagrad:
    def __init__(self, lr, initial_accumulator):
        self.lr = np.float32(lr)
        self.initial = initial_accumulator
        self.acc = {}

    def dense(self, name, w, g):
        acc = self.acc.setdefault(name, np.full_like(w, self.initial))
        acc += g * g
        w -= self.lr * g / (np.sqrt(acc) + EPSILON)

    def rows(self, name, table, ids, row_grads):
        """ids [m] (-1: none) with row_grads [m, dim]: summed per row, then applied."""
        acc = self.acc.setdefault(name, np.full_like(table, self.initial))
        valid = ids >= 0
        rows, inverse = np.unique(ids[valid], return_inverse=True)
        g = np.zeros((len(rows), table.shape[1]), np.float32)
        np.add.at(g, inverse, row_grads[valid])
        acc[rows] += g * g
        table[rows] -= self.lr * g / (np.sqrt(acc[rows]) + EPSILON)


class Model:
    """The embeddings + MLP model, or (linear=True) the logistic regression."""

    def __init__(self, schema, dim, hidden, linear, rng):
        self.linear = linear
        self.num_dense = schema["num_dense"]
        self.dim = 1 if linear else dim
        self.tables = []
        for feat in schema["categorical"]:
            shape = (feat["vocab_size"], self.dim)
            if linear:
                self.tables.append(np.zeros(shape, np.float32))
            else:
                self.tables.append(rng.uniform(-0.05, 0.05, shape).astype(np.float32))
        if linear:
            self.w_dense = np.zeros((self.num_dense, 1), np.float32)
            self.b = np.zeros(1, np.float32)
        else:
            inputs = self.num_dense + len(self.tables) * dim
            self.w1 = glorot(rng, inputs, hidden)
            self.b1 = np.zeros(hidden, np.float32)
            self.w2 = glorot(rng, hidden, 1)
            self.b2 = np.zeros(1, np.float32)

    def pooled(self, ids):
        """Per feature, the sum of its ids' rows: [batch, dim]; missing ids add nothing."""
        out = []
        for table, x in zip(self.tables, ids):
            rows = table[np.maximum(x, 0)] * (x >= 0)[:, :, None]
            out.append(rows.sum(axis=1))
        return out

    def forward(self, dense, ids):
        pooled = self.pooled(ids)
        if self.linear:
            logit = dense @ self.w_dense + self.b + sum(pooled)
            return logit[:, 0], None
        x = np.concatenate([dense] + pooled, axis=1)
        h = np.maximum(x @ self.w1 + self.b1, 0)
        return (h @ self.w2 + self.b2)[:, 0], (x, h)

    def predict(self, dense, ids, batch=4096):
        out = [sigmoid(self.forward(dense[i:i + batch], [x[i:i + batch] for x in ids])[0])
               for i in range(0, len(dense), batch)]
        return np.concatenate(out)

    def step(self, opt, labels, dense, ids):
        """One Adagrad step on a batch; returns the batch's mean log loss before it."""
        logit, cache = self.forward(dense, ids)
        p = sigmoid(logit)
        d_logit = ((p - labels) / len(labels)).astype(np.float32)[:, None]
        if self.linear:
            opt.dense("w_dense", self.w_dense, dense.T @ d_logit)
            opt.dense("b", self.b, d_logit.sum(axis=0))
            d_pooled = [d_logit] * len(self.tables)
        else:
            x, h = cache
            d_h = (d_logit @ self.w2.T) * (h > 0)
            d_x = d_h @ self.w1.T
            opt.dense("w2", self.w2, h.T @ d_logit)
            opt.dense("b2", self.b2, d_logit.sum(axis=0))
            opt.dense("w1", self.w1, x.T @ d_h)
            opt.dense("b1", self.b1, d_h.sum(axis=0))
            d_pooled = [d_x[:, self.num_dense + k * self.dim:self.num_dense + (k + 1) * self.dim]
                        for k in range(len(self.tables))]
        for k, (table, x) in enumerate(zip(self.tables, ids)):
            hot = x.shape[1]
            grads = np.repeat(d_pooled[k], hot, axis=0)  # row r*hot+h gets example r's grad
            opt.rows(f"table_{k}", table, x.reshape(-1), grads)
        return logloss(labels, p)


def glorot(rng, fan_in, fan_out):
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


def train(name, args, schema, train_set, test_set):
    rng = np.random.default_rng(args.seed)
    model = Model(schema, args.dim, args.hidden, linear=(name == "logistic_regression"),
                  rng=rng)
    opt = Adagrad(args.lr, args.initial_accumulator)
    labels, dense, ids = train_set
    start = time.monotonic()
    per_epoch = []
    for epoch in range(args.epochs):
        order = rng.permutation(len(labels))
        losses = []
        for i in range(0, len(order), args.batch):
            b = order[i:i + args.batch]
            losses.append(model.step(opt, labels[b], dense[b], [x[b] for x in ids]))
        p = model.predict(test_set[1], test_set[2])
        per_epoch.append({"epoch": epoch + 1, "train_logloss": round(float(np.mean(losses)), 6),
                          "test_auc": round(auc(test_set[0], p), 6),
                          "test_logloss": round(logloss(test_set[0], p), 6)})
        print(f"reference: {name} epoch {epoch + 1}: {json.dumps(per_epoch[-1])}",
              file=sys.stderr, flush=True)
    seconds = time.monotonic() - start
    return {"auc": per_epoch[-1]["test_auc"], "logloss": per_epoch[-1]["test_logloss"],
            "per_epoch": per_epoch, "seconds": round(seconds, 2)}


def main():
    cache = os.environ.get("SHARDPS_CACHE") or os.path.expanduser("~/.cache/shardps")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(cache, "movielens-100k"),
                        help="a directory with schema.json, train.tsv and test.tsv")
    parser.add_argument("--dim", type=int, default=16, help="embedding dimension")
    parser.add_argument("--hidden", type=int, default=64, help="hidden ReLU units")
    parser.add_argument("--lr", type=float, default=0.05, help="Adagrad learning rate")
    parser.add_argument("--initial_accumulator", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="mlp,logistic_regression",
                        help="comma-separated: mlp, logistic_regression")
    parser.add_argument("--max_train", type=int, default=None,
                        help="use only the first N lines of train.tsv (quick checks)")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in ("mlp", "logistic_regression"):
            parser.error(f"--models: unknown model {m!r}")

    schema_path = os.path.join(args.data, "schema.json")
    try:
        with open(schema_path) as f:
            schema = json.load(f)
    except OSError as e:
        sys.exit(f"reference: cannot read {schema_path} ({e}); run data/movielens/prepare.sh")
    start = time.monotonic()
    train_set = load(os.path.join(args.data, "train.tsv"), schema, args.max_train)
    test_set = load(os.path.join(args.data, "test.tsv"), schema)
    print(f"reference: loaded {len(train_set[0])} train, {len(test_set[0])} test examples in "
          f"{time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)

    result = {
        "data": os.path.abspath(args.data),
        "dataset": schema.get("name"),
        "hyperparameters": {k: getattr(args, k) for k in
                            ("dim", "hidden", "lr", "initial_accumulator", "epochs", "batch",
                             "seed", "max_train")},
        "train": {"examples": len(train_set[0]),
                  "positive_rate": round(float(train_set[0].mean()), 6)},
        "test": {"examples": len(test_set[0]),
                 "positive_rate": round(float(test_set[0].mean()), 6)},
        "models": {m: train(m, args, schema, train_set, test_set) for m in models},
    }
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

"""A two-tower recommender on MovieLens-100k (a rating >= 4 is a click) whose embedding tables
and towers live on shardps' ps tasks. Each copy of this script is a worker of the job
movielens_two_tower.json, or its evaluator (by TF_CONFIG's task type):

    data/movielens/prepare.sh     # once: the data set, into ~/.cache/shardps/movielens-100k
    deploy/run_local.sh examples/movielens_two_tower.json --python examples/movielens_two_tower.py

The user tower reads a dynamic table keyed by user id (rows are made as ids appear, as for
ids that are hashed strings) and a bag of the user's features; the item tower a fixed table
of item ids and a bag of genres and release year. The score is the towers' dot product plus
a linear term of the two dense features. The ps applies Adagrad (TensorFlow's form: the
accumulator starts at 0.1) to the towers and, row by row, to the tables.

    python3 examples/movielens_two_tower.py --reference   # the same model and optimizer
                                                          # rule in one process: its AUC
    python3 examples/movielens_two_tower.py --variables   # the job file's "variables"
"""

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

import shardps
import shardps.torch as spt
from shardps.datasets import batch_indices, movielens

DIM = 16
USER_FEATURES = ("gender", "age_bucket", "occupation", "zip_prefix")
SMALL_UNIFORM = {"type": "random_uniform", "minval": -0.05, "maxval": 0.05}


class TwoTower(torch.nn.Module):
    """`embedding(name, rows or None, dim)` and `bag(name, rows, dim)` make the tables: the
    ps' ShardedEmbedding(Bag) for training through shardps, torch's own for the reference."""

    def __init__(self, vocab, embedding, bag):
        super().__init__()
        self.user_offsets = np.cumsum([0] + [vocab[f] for f in USER_FEATURES[:-1]])
        self.genres = vocab["genres"]
        self.missing_year = vocab["genres"] + vocab["release_year"]
        self.user = embedding("user_id", None, DIM)
        self.user_features = bag("user_features", sum(vocab[f] for f in USER_FEATURES), DIM)
        self.item = embedding("item_id", vocab["item_id"], DIM)
        # genres, then release years, then one row for a missing year
        self.item_features = bag("item_features", vocab["genres"] + vocab["release_year"] + 1,
                                 DIM)
        self.user_tower = torch.nn.Sequential(torch.nn.Linear(2 * DIM + 1, 32), torch.nn.ReLU(),
                                              torch.nn.Linear(32, DIM))
        self.item_tower = torch.nn.Sequential(torch.nn.Linear(2 * DIM + 1, 32), torch.nn.ReLU(),
                                              torch.nn.Linear(32, DIM))
        self.dense = torch.nn.Linear(2, 1)

    def inputs(self, data, rows):
        """The model's input tensors for the examples `rows` of a movielens() split."""
        user_bag = np.stack([data[f][rows] + o for f, o in zip(USER_FEATURES, self.user_offsets)],
                            axis=1)
        genres = data["genres"][rows]
        year = data["release_year"][rows]
        year = np.where(year < 0, self.missing_year, self.genres + year)
        item_bag = np.concatenate([np.maximum(genres, 0), year[:, None]], axis=1)
        weights = np.concatenate([(genres >= 0), np.ones((len(rows), 1), bool)], axis=1)
        return (torch.from_numpy(data["user_id"][rows]), torch.from_numpy(user_bag),
                torch.from_numpy(data["item_id"][rows]), torch.from_numpy(item_bag),
                torch.from_numpy(weights.astype(np.float32)), torch.from_numpy(data["dense"][rows]))

    def forward(self, user, user_bag, item, item_bag, item_weights, dense):
        u = self.user_tower(torch.cat([self.user(user), self.user_features(user_bag),
                                       dense[:, :1]], dim=1))
        i = self.item_tower(torch.cat([self.item(item), self.item_features(item_bag, item_weights),
                                       dense[:, 1:]], dim=1))
        return (u * i).sum(dim=1) + self.dense(dense).squeeze(1)


def sharded_model(vocab):
    return TwoTower(
        vocab,
        lambda name, rows, dim: spt.ShardedEmbedding(name, rows, dim, initializer=SMALL_UNIFORM),
        lambda name, rows, dim: spt.ShardedEmbeddingBag(name, rows, dim, initializer=SMALL_UNIFORM))


class LocalBag(torch.nn.Module):
    def __init__(self, rows, dim):
        super().__init__()
        self.table = torch.nn.Embedding(rows, dim)
        torch.nn.init.uniform_(self.table.weight, -0.05, 0.05)

    def forward(self, ids, per_sample_weights=None):
        vectors = self.table(ids)
        if per_sample_weights is not None:
            vectors = vectors * per_sample_weights.unsqueeze(-1)
        return vectors.sum(dim=1)


def local_model(vocab):
    def embedding(name, rows, dim):
        table = torch.nn.Embedding(rows or vocab["user_id"], dim)
        torch.nn.init.uniform_(table.weight, -0.05, 0.05)
        return table
    return TwoTower(vocab, embedding, lambda name, rows, dim: LocalBag(rows, dim))


def auc(labels, scores):
    """ROC AUC, ties counted half (average ranks)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    positives = labels > 0.5
    n_pos, n_neg = positives.sum(), (~positives).sum()
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def metrics(model, data):
    with torch.no_grad():
        logits = model(*model.inputs(data, np.arange(len(data["label"]))))
    labels = torch.from_numpy(data["label"])
    return dict(auc=auc(data["label"], logits.numpy()),
                loss=float(F.binary_cross_entropy_with_logits(logits, labels)),
                accuracy=float(((logits > 0).float() == labels).float().mean()),
                examples=len(labels))


def train(vocab):
    data = movielens("train")
    model = sharded_model(vocab)
    opt = spt.DistributedOptimizer(model)
    with shardps.Worker() as worker:
        for step in worker.steps():
            inputs = model.inputs(data, step.indices)
            # Every table's rows in one call, beside the dense pull.
            ids = {"user_id": inputs[0], "user_features": inputs[1], "item_id": inputs[2],
                   "item_features": inputs[3]}
            with step, opt.use(step, ids=ids):
                labels = torch.from_numpy(data["label"][step.indices])
                logits = model(*inputs)
                loss = F.binary_cross_entropy_with_logits(logits, labels)
                loss.backward()
                opt.step()
                step.done(loss=loss.item(), correct=int(((logits > 0).float() == labels).sum()),
                          examples=len(labels))


def evaluate(vocab):
    data = movielens("test")
    model = sharded_model(vocab)
    ids = {"user_id": data["user_id"], "item_id": data["item_id"]}
    inputs = model.inputs(data, np.arange(len(data["label"])))
    ids["user_features"] = inputs[1]
    ids["item_features"] = inputs[3]

    def score(state):
        with spt.evaluating(state, model, ids=ids):
            return metrics(model, data)

    with shardps.Evaluator() as evaluator:
        evaluator.run(score)


def reference(vocab, job, seed):
    """The job's model and optimizer rule in one process: the same batches, each sync step's
    replicas' gradients summed as the ps sums them, Adagrad in TensorFlow's form."""
    torch.manual_seed(seed)
    train_data, test_data = movielens("train"), movielens("test")
    model = local_model(vocab)
    tables = [p for n, p in model.named_parameters() if n.split(".")[0] in
              ("user", "user_features", "item", "item_features")]
    towers = [p for n, p in model.named_parameters() if all(p is not t for t in tables)]
    groups = [(towers, job["optimizer"]), (tables, job["embedding_optimizer"])]
    initial = {o.get("initial_accumulator_value", 0.1) for _, o in groups}
    if any(o["type"] != "adagrad" for _, o in groups) or len(initial) != 1:
        raise SystemExit("--reference: the job's optimizers must both be adagrad with one "
                         "initial_accumulator_value")
    # torch's Adagrad with eps 0 and the accumulator starting at 0.1 is TensorFlow's form
    # (torch takes the initial value for all groups from its constructor).
    opt = torch.optim.Adagrad([{"params": p, "lr": o["learning_rate"]} for p, o in groups],
                              initial_accumulator_value=initial.pop(), eps=0.0)
    examples, size, replicas = len(train_data["label"]), job["batch_size"], 2
    batches = -(-examples // size)
    start = time.time()
    for epoch in range(job["epochs"]):
        for first in range(0, batches, replicas):
            opt.zero_grad()
            loss = 0.0
            for b in range(first, min(first + replicas, batches)):
                rows = batch_indices(examples, job["seed"], epoch, b, size)
                labels = torch.from_numpy(train_data["label"][rows])
                loss = loss + F.binary_cross_entropy_with_logits(
                    model(*model.inputs(train_data, rows)), labels)
            loss.backward()
            opt.step()
    result = metrics(model, test_data)
    result["seconds"] = time.time() - start
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--variables", action="store_true")
    parser.add_argument("--job", default=None, help="the job file (for --reference)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one core per worker, as the C++ workers' --threads=1
    vocab = movielens("test")["vocab"]
    if args.variables:
        print(json.dumps(spt.declare(sharded_model(vocab))))
    elif args.reference:
        with open(args.job or __file__.replace(".py", ".json")) as f:
            job = json.load(f)
        print(json.dumps(reference(vocab, job, args.seed)))
    elif shardps.task()[0] == "evaluator":
        evaluate(vocab)
    else:
        train(vocab)


if __name__ == "__main__":
    main()

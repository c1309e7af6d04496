"""A shardps.torch worker (or evaluator, by TF_CONFIG's task type) of a small click model on
planted synthetic data, for torch_job_test.py: a dynamic user table, a fixed item table read
as bags, and a dense head, all on the ps.

usage: torch_worker.py LOG [--loader_workers N]

The worker logs "<min_version> <sha256 of the pulled dense parameters>" per step, the
evaluator "<version> <final> <sha256 of everything it read> <accuracy>" per evaluation and
"outcome <how the job ended>" last. --loader_workers N reads each batch through a torch
DataLoader with N worker processes, forked while the extension's threads run.
"""

import argparse
import hashlib
import json

import numpy as np
import torch
import torch.nn.functional as F

import shardps
import shardps.torch as spt

EXAMPLES = 512


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.users = spt.ShardedEmbedding("users", None, 4)
        self.items = spt.ShardedEmbeddingBag("items", 50, 4, mode="sum")
        self.head = torch.nn.Linear(8, 1)

    def forward(self, users, items):
        return self.head(torch.cat([self.users(users), self.items(items)], 1)).squeeze(1)


def data():
    rng = np.random.default_rng(5)
    users = rng.integers(0, 64, EXAMPLES) * 1_000_003 + (1 << 40)  # hashed-looking keys
    items = rng.integers(0, 50, (EXAMPLES, 2))
    user_taste = {u: rng.normal() for u in np.unique(users)}
    item_score = rng.normal(size=50)
    score = np.array([user_taste[u] for u in users]) + item_score[items].sum(1)
    return (torch.from_numpy(users), torch.from_numpy(items),
            torch.from_numpy((score > 0).astype(np.float32)))


def batches(indices, tensors, loader_workers):
    if loader_workers == 0:
        return [t[indices] for t in tensors]
    dataset = torch.utils.data.TensorDataset(*tensors)
    loader = torch.utils.data.DataLoader(torch.utils.data.Subset(dataset, indices.tolist()),
                                         batch_size=len(indices), num_workers=loader_workers)
    return next(iter(loader))


def digest(arrays):
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(np.ascontiguousarray(arrays[name]).tobytes())
    return h.hexdigest()


def train(log, loader_workers):
    model = Model()
    users, items, labels = data()
    opt = spt.DistributedOptimizer(model)
    with shardps.Worker() as worker:
        for step in worker.steps():
            with step, opt.use(step):
                log.write(f"{step.min_version} "
                          f"{digest({n: p.detach().numpy() for n, p in opt.dense})}\n")
                log.flush()
                u, i, y = batches(step.indices, (users, items, labels), loader_workers)
                logits = model(u, i)
                loss = F.binary_cross_entropy_with_logits(logits, y)
                loss.backward()
                opt.step()
                step.done(loss=loss.item(), correct=int(((logits > 0).float() == y).sum()),
                          examples=len(y))


def evaluate(log, loader_workers):
    model = Model()
    users, items, labels = data()
    with shardps.Evaluator() as evaluator:
        for state in evaluator.states():
            with state:
                with spt.evaluating(state, model, ids={"users": users, "items": items}):
                    read = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
                    with torch.no_grad():
                        u, i, y = batches(np.arange(EXAMPLES), (users, items, labels),
                                          loader_workers)
                        logits = model(u, i)
                        read["users"] = model.users(torch.unique(users)).numpy()
                accuracy = float(((logits > 0).float() == y).float().mean())
                state.report(accuracy=accuracy, examples=EXAMPLES,
                             loss=float(F.binary_cross_entropy_with_logits(logits, y)))
                log.write(f"{state.version} {state.final} {digest(read)} {accuracy}\n")
                log.flush()
        log.write(f"outcome {evaluator.outcome}\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--loader_workers", type=int, default=0)
    parser.add_argument("--variables", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.variables:
        print(json.dumps(spt.declare(Model())))
        return
    with open(args.log, "a") as log:
        if shardps.task()[0] == "evaluator":
            evaluate(log, args.loader_workers)
        else:
            train(log, args.loader_workers)


if __name__ == "__main__":
    main()

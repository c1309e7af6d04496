"""The limit for examples/fashion_cnn.py: the same CNN, job (fashion_cnn.json: batches,
Adam, epochs) and update rule (each update the sum of two batches' mean-loss gradients, as a
sync step of 2 replicas is) trained in one process with torch.optim.Adam, no ps:

    $(deploy/python_env.sh --torch)/bin/python bench/python/cnn_one_process.py [--threads T]

Evaluates the test split every `eval_every_steps` updates (the clock paused meanwhile, as
the cluster's evaluator runs beside it) and prints the time to 0.90, the final accuracy and
the training time as JSON.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from fashion_cnn import Net, images  # noqa: E402
from shardps.datasets import batch_indices  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", type=float, default=0.90)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with open(os.path.join(HERE, "..", "..", "examples", "fashion_cnn.json")) as f:
        job = json.load(f)
    x, y = images("train")
    tx, ty = images("test")
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=job["optimizer"]["learning_rate"],
                           eps=1e-7)
    n, size = job["examples_per_epoch"], job["batch_size"]
    batches = -(-n // size)
    clock, reached, updates, accuracy = 0.0, None, 0, 0.0
    for epoch in range(job["epochs"]):
        for first in range(0, batches, 2):
            start = time.perf_counter()
            opt.zero_grad()
            loss = 0.0
            for b in range(first, min(first + 2, batches)):
                idx = torch.from_numpy(batch_indices(n, job["seed"], epoch, b, size))
                loss = loss + F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            clock += time.perf_counter() - start
            updates += 1
            if updates % (job["eval_every_steps"] // 2) == 0 or (
                    epoch == job["epochs"] - 1 and first + 2 >= batches):
                with torch.no_grad():
                    logits = torch.cat([model(tx[i:i + 1000]) for i in range(0, len(tx), 1000)])
                accuracy = float((logits.argmax(1) == ty).float().mean())
                if reached is None and accuracy >= args.target:
                    reached = clock
    print(json.dumps({"threads": args.threads, "time_to_target_s": reached,
                      "target": args.target, "final_accuracy": accuracy,
                      "training_s": clock, "updates": updates}))


if __name__ == "__main__":
    main()

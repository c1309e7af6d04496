"""A small PyTorch CNN on Fashion-MNIST whose parameters live on shardps' ps tasks: a model the
C++ worker does not have. Each copy of this script is a worker of the job fashion_cnn.json,
or its evaluator (by TF_CONFIG's task type):

    deploy/run_local.sh examples/fashion_cnn.json --python examples/fashion_cnn.py

Each step the worker pulls the CNN's parameters at the step's version into the torch module
(in place), computes the gradient of its batch with torch and pushes it; the ps applies Adam
(the job's optimizer). The evaluator scores the parameters on the test split and reports to
the chief, so the launcher ends with the final test accuracy.

    python3 examples/fashion_cnn.py --variables   # the job file's "variables" for Net
"""

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F

import shardps
import shardps.torch as spt
from shardps.datasets import fashion_mnist


class Net(torch.nn.Module):
    """conv 3x3x32 - pool - conv 3x3x64 - pool - dense 128 - dense 10 (421,642 parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def images(split):
    x, y = fashion_mnist(split)
    return torch.from_numpy(x).view(-1, 1, 28, 28), torch.from_numpy(y)


def train(model, x, y):
    """Runs this worker's steps: `model` classifies x[i] (a tensor of examples) as y[i]."""
    opt = spt.DistributedOptimizer(model)
    with shardps.Worker() as worker:
        for step in worker.steps():
            with step, opt.use(step):
                idx = torch.from_numpy(step.indices)
                logits = model(x[idx])
                loss = F.cross_entropy(logits, y[idx])
                loss.backward()
                opt.step()
                step.done(loss=loss.item(), correct=int((logits.argmax(1) == y[idx]).sum()),
                          examples=len(idx))


def evaluate(model, x, y):
    """Runs the job's evaluations of `model` on the test examples x, y."""

    def score(state):
        with spt.evaluating(state, model), torch.no_grad():
            logits = torch.cat([model(x[i:i + 1000]) for i in range(0, len(x), 1000)])
        return dict(accuracy=float((logits.argmax(1) == y).float().mean()),
                    loss=float(F.cross_entropy(logits, y)), examples=len(y))

    with shardps.Evaluator() as evaluator:
        evaluator.run(score)


def main():
    torch.set_num_threads(1)  # one core per worker, as the C++ workers' --threads=1
    model = Net()
    if "--variables" in sys.argv:
        print(json.dumps(spt.declare(model)))
    elif shardps.task()[0] == "evaluator":
        evaluate(model, *images("test"))
    else:
        train(model, *images("train"))


if __name__ == "__main__":
    main()

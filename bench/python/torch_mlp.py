"""The main job's model, the MLP 784-256-128-10 (model "mlp:256,128"), written as a PyTorch
module and trained through shardps.Worker, for bench/python_vs_cpp.sh: the same job file as
deploy/jobs/fashion_mlp.json with model "external" and these variables (bench/python/
torch_mlp.json). Each copy is a worker, or the evaluator (by TF_CONFIG's task type).
"""

import os
import sys

import torch
import torch.nn.functional as F

import shardps
from shardps.datasets import fashion_mnist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from fashion_cnn import evaluate, train  # noqa: E402  (the CNN example's loops)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 256)
        self.fc2 = torch.nn.Linear(256, 128)
        self.fc3 = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    torch.set_num_threads(1)  # as the C++ workers' --threads=1
    role = "test" if shardps.task()[0] == "evaluator" else "train"
    x, y = (torch.from_numpy(a) for a in fashion_mnist(role))
    (evaluate if role == "test" else train)(Mlp(), x, y)


if __name__ == "__main__":
    main()

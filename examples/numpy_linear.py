"""Softmax regression on Fashion-MNIST with numpy gradients: shardps' contract without any
framework. Each copy of this script is one worker of the job numpy_linear.json:

    deploy/run_local.sh examples/numpy_linear.json --python examples/numpy_linear.py

The chief leases each worker steps (an epoch and a batch index); the worker pulls the
parameters, computes the gradient of the mean cross-entropy with numpy and pushes it; the ps
applies SGD. The chief's status (shardctl status, the launcher's progress line) shows the
training loss and accuracy of the recent steps. The launcher also runs this script as the
job's evaluator (TF_CONFIG's task type "evaluator"): it scores the parameters on the test
split while the job trains and once it ends, and the launcher prints that final accuracy.
"""

import numpy as np

import shardps
from shardps.datasets import fashion_mnist


def softmax_step(w, b, x, y):
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
    correct = int((p.argmax(axis=1) == y).sum())
    d = p
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    return loss, correct, (x.T @ d).astype(np.float32), d.sum(axis=0).astype(np.float32)


def evaluate(state, x, y):
    p = state.pull()
    loss, correct, _, _ = softmax_step(p["dense/kernel"], p["dense/bias"], x, y)
    return dict(accuracy=correct / len(y), loss=loss, examples=len(y))


def main():
    if shardps.task()[0] == "evaluator":
        x, y = fashion_mnist("test")
        with shardps.Evaluator() as evaluator:
            evaluator.run(lambda state: evaluate(state, x, y))
        return
    x, y = fashion_mnist("train")
    with shardps.Worker() as worker:
        for step in worker.steps():
            with step:
                xb, yb = x[step.indices], y[step.indices]
                p = step.pull()
                loss, correct, dw, db = softmax_step(p["dense/kernel"], p["dense/bias"], xb, yb)
                step.push({"dense/kernel": dw, "dense/bias": db})
                step.done(loss=loss, correct=correct, examples=len(yb))


if __name__ == "__main__":
    main()

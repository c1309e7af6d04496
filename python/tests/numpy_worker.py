"""A shardps.Worker computing softmax regression with numpy on planted synthetic data, for
worker_test.py. usage: numpy_worker.py LOG [--fail_step N] [--die_after N] [--step_sleep S]

Writes one line per step to LOG: "<min_version> <sha256 of the pulled parameters> <epoch>
<batch index> <the batch's example indices, comma-separated>", so that two runs of a sync job
can be compared version by version whichever worker ran a step, and the batches checked.
--fail_step N raises in step N's first attempt (a marker file beside LOG remembers it);
--always_fail_step N raises in every attempt of step N; --die_after N kills this process
(SIGKILL) after N steps; --step_sleep S sleeps S seconds in
each step (a slow worker, so that the other one surely gets steps); --scrape FILE writes the
task's own /metrics (SHARDPS_METRICS_PORT), fetched over HTTP once the job has ended, to FILE. Run as TF_CONFIG's
evaluator task it is a shardps.Evaluator scoring the parameters on the whole data set, and
logs "<version> <final> <sha256 of the parameters> <accuracy> <consistent>" per evaluation to
LOG, and "outcome <how the job ended>" last.
"""

import argparse
import hashlib
import os
import signal
import time
import urllib.request

import numpy as np

import shardps

EXAMPLES, DIM, CLASSES = 512, 8, 2


def data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(EXAMPLES, DIM)).astype(np.float32)
    planted = rng.normal(size=(DIM, CLASSES)).astype(np.float32)
    y = np.argmax(x @ planted, axis=1)
    return x, y


def softmax(x, w, b):
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    prob = np.exp(logits)
    return prob / prob.sum(axis=1, keepdims=True)


def scrape(task, path):
    """The task's /metrics, as Prometheus would fetch it, into `path`."""
    if path:
        with urllib.request.urlopen(task.metrics_url, timeout=10) as answer, \
                open(path, "wb") as f:
            f.write(answer.read())


def evaluate(log_path, scrape_path):
    x, y = data()
    with shardps.Evaluator() as evaluator, open(log_path, "a") as log:
        for state in evaluator.states():
            with state:
                p = state.pull()
                digest = hashlib.sha256(p["w"].tobytes() + p["b"].tobytes()).hexdigest()
                prob = softmax(x, p["w"], p["b"])
                accuracy = float((prob.argmax(1) == y).mean())
                loss = float(-np.log(prob[np.arange(len(y)), y]).mean())
                state.report(accuracy=accuracy, loss=loss, examples=len(y))
                log.write(f"{state.version} {state.final} {digest} {accuracy} {state.consistent}\n")
                log.flush()
        log.write(f"outcome {evaluator.outcome}\n")
        scrape(evaluator, scrape_path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--fail_step", type=int, default=-1)
    parser.add_argument("--die_after", type=int, default=-1)
    parser.add_argument("--always_fail_step", type=int, default=-1)
    parser.add_argument("--step_sleep", type=float, default=0.0)
    parser.add_argument("--scrape", default="")
    args = parser.parse_args()
    if shardps.task()[0] == "evaluator":
        evaluate(args.log, args.scrape)
        return
    x, y = data()
    done = 0
    with shardps.Worker() as worker, open(args.log, "a") as log:
        for step in worker.steps():
            with step:
                marker = f"{args.log}.failed-{step.step_id}"
                if step.step_id == args.fail_step and not os.path.exists(marker):
                    open(marker, "w").close()
                    raise RuntimeError(f"planned failure of step {step.step_id}")
                if step.step_id == args.always_fail_step:
                    raise RuntimeError(f"step {step.step_id} always fails")
                time.sleep(args.step_sleep)
                p = step.pull()
                digest = hashlib.sha256(p["w"].tobytes() + p["b"].tobytes()).hexdigest()
                batch = ",".join(str(i) for i in step.indices)
                log.write(f"{step.min_version} {digest} {step.epoch} {step.batch_index} {batch}\n")
                log.flush()
                xb, yb = x[step.indices], y[step.indices]
                prob = softmax(xb, p["w"], p["b"])
                loss = float(-np.log(prob[np.arange(len(yb)), yb]).mean())
                d = prob
                d[np.arange(len(yb)), yb] -= 1
                d /= len(yb)
                step.push({"w": (xb.T @ d).astype(np.float32),
                           "b": d.sum(axis=0).astype(np.float32)})
                step.done(loss=loss, correct=int((prob.argmax(1) == yb).sum()),
                          examples=len(yb))
            done += 1
            if done == 2:
                try:
                    step.push({"w": np.zeros((DIM, CLASSES), np.float32),
                               "b": np.zeros(CLASSES, np.float32)})
                    log.write("push after the step's end: accepted\n")
                except shardps.FailedPrecondition as e:
                    assert "has ended" in str(e), e
            if done == args.die_after:
                os.kill(os.getpid(), signal.SIGKILL)
        scrape(worker, args.scrape)


if __name__ == "__main__":
    main()

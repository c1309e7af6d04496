#!/usr/bin/env python3
"""The TensorFlow peer's evaluator process: what shardps' evaluator daemon does for a shardps
job, for tf_pss.py. It reads parameter values from stdin, evaluates the MLP on all 10,000
Fashion-MNIST test examples (float32, batches of 1000, one BLAS thread), appends one line to
the metrics file in shardps' format (evaluator/metrics_file.h; "time" is when the evaluation
ended, as there) and answers the same line on stdout.

Protocol, per evaluation: one JSON line {"step": S, "final": B, "consistent": B,
"shapes": [[784, 256], [256], ...]} followed by the values as raw little-endian float32, in
Params order (kernel [in, out], then bias, per layer). The test set is loaded at the first
request, as shardps' evaluator loads it at its first evaluation.
"""

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np


def load_test_set(data_dir):
  with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz")) as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16)
  with gzip.open(os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz")) as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)
  scale = (np.arange(256, dtype=np.float32) / np.float32(255)).astype(np.float32)
  return scale[images].reshape(-1, 784), labels.astype(np.int64)


def cnn_logits(values, x):
  """examples/fashion_cnn.py's CNN in TensorFlow's layout: conv 3x3x32 SAME, ReLU, max-pool 2,
  conv 3x3x64, ReLU, max-pool 2, dense 128 ReLU, dense 10 (values: kernel, bias per layer)."""
  import tensorflow as tf
  h = tf.reshape(x, [-1, 28, 28, 1])
  for layer in range(2):
    h = tf.nn.relu(tf.nn.conv2d(h, values[2 * layer], 1, "SAME") + values[2 * layer + 1])
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
  h = tf.reshape(h, [-1, 7 * 7 * 64])
  h = tf.nn.relu(tf.matmul(h, values[4]) + values[5])
  return (tf.matmul(h, values[6]) + values[7]).numpy()


def evaluate(values, x, y, batch=1000):
  loss_sum = 0.0
  correct = 0
  layers = len(values) // 2
  for begin in range(0, len(y), batch):
    h = x[begin:begin + batch]
    if values[0].ndim == 4:  # the CNN
      h = cnn_logits(values, h)
    else:
      for layer in range(layers):
        h = h @ values[2 * layer] + values[2 * layer + 1]
        if layer < layers - 1:
          h = np.maximum(h, 0)
    labels = y[begin:begin + batch]
    shifted = h - h.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss_sum += float(-log_probs[np.arange(len(labels)), labels].astype(np.float64).sum())
    correct += int((h.argmax(axis=1) == labels).sum())
  return loss_sum / len(y), correct / len(y)


def die_with_parent():
  """Linux: SIGKILL when the coordinator that started this process ends."""
  try:
    import ctypes
    import signal
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
  except OSError:
    pass


def main():
  die_with_parent()
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", required=True)
  parser.add_argument("--metrics_file", required=True)
  parser.add_argument("--job_id", default="tf-pss")
  args = parser.parse_args()
  test = None
  stdin = sys.stdin.buffer
  with open(args.metrics_file, "a") as metrics:
    while True:
      line = stdin.readline()
      if not line:
        return
      header = json.loads(line)
      values = []
      for shape in header["shapes"]:
        n = int(np.prod(shape))
        values.append(np.frombuffer(stdin.read(4 * n), np.float32).reshape(shape))
      if test is None:
        test = load_test_set(args.data_dir)
      loss, accuracy = evaluate(values, *test)
      record = {"job_id": args.job_id, "step": header["step"], "version": header["step"],
                "checkpoint_id": 0, "time": round(time.time(), 3), "loss": round(loss, 6),
                "accuracy": round(accuracy, 6), "examples": len(test[1]),
                "consistent": header["consistent"], "final": header["final"]}
      text = json.dumps(record)
      metrics.write(text + "\n")
      metrics.flush()
      sys.stdout.write(text + "\n")
      sys.stdout.flush()


if __name__ == "__main__":
  main()

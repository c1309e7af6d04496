#!/usr/bin/env python3
"""TensorFlow's ParameterServerStrategy on the click model that bench/ctr_vs_tf.sh trains with
shardps: one run, as the peer that shardps' examples/s and AUC are measured against.

  python tf_ctr.py --train TRAIN.bin --test TEST.bin --workers N --out RUN.json [--epochs 1]

The data are `ctr_tool export` files (fixed-size records: f32 label, f32 dense[D], i64 id per
table; F.json beside F.bin gives D, the tables' vocabularies and the record size), made from
the same synthetic_ctr spec as shardps' job, so both train on the same examples.

The cluster is real processes on loopback, as in tf_pss.py (whose `server` mode runs each ps
and worker): 2 ps and N workers, and the coordinator (ParameterServerStrategy +
ClusterCoordinator) in this process. Every variable is split into --ps shards
(FixedShardsPartitioner, shardps' "fixed:2") and placed round robin.

The model, as shardps' `dlrm:bottom=64,16;top=64,32;dim=16;interaction=concat;pooling=sum`
(model/dlrm/dlrm_spec.h): one table per feature [vocab, dim], uniform(-0.05, 0.05); a bottom
MLP over the dense features with ReLU on every layer; the bottom output and the tables' rows
concatenated; a top MLP with ReLU on its hidden layers and one logit; sigmoid, mean log loss.
Kernels Glorot-uniform, biases 0. Adagrad as TensorFlow's ResourceApplyAdagradV2 (acc += g^2;
w -= lr g / (sqrt(acc) + eps)), accumulators starting at --initial_accumulator, the tables'
rows updated sparsely (ResourceSparseApplyAdagradV2, a batch's duplicate ids summed first, as
Keras does), which is shardps' row-sparse Adagrad.

Each worker reads the training file with tf.data, shuffles it (a buffer of 65536 examples,
reshuffled every epoch) and cuts batches of --batch_size. The clock runs while steps run; it
stops for each evaluation (--evals_per_epoch of them, evenly spaced, the last at the epoch's
end), which reads every variable from the ps and computes the held-out AUC (exact, ties
averaged) and log loss in numpy: the points of the time-to-AUC curve.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tf_pss  # noqa: E402  (the servers and process helpers)


def load_meta(path):
  with open(path[:-4] + ".json") as f:
    return json.load(f)


def read_records(np, path, meta):
  raw = np.fromfile(path, dtype=np.uint8).reshape(meta["examples"], meta["record_bytes"])
  d, t = meta["dense"], meta["tables"]
  labels = raw[:, 0:4].copy().view(np.float32).reshape(-1)
  dense = raw[:, 4:4 + 4 * d].copy().view(np.float32).reshape(-1, d)
  ids = raw[:, 4 + 4 * d:].copy().view(np.int64).reshape(-1, t)
  return labels, dense, ids


def exact_auc(np, scores, labels):
  """ROC AUC with ties averaged (the Mann-Whitney statistic), as common/auc does."""
  order = np.argsort(scores, kind="mergesort")
  s = scores[order]
  ranks = np.empty(len(s), np.float64)
  i = 0
  while i < len(s):
    j = i
    while j + 1 < len(s) and s[j + 1] == s[i]:
      j += 1
    ranks[i:j + 1] = (i + j) / 2.0 + 1.0
    i = j + 1
  r = np.empty(len(s), np.float64)
  r[order] = ranks
  pos = labels > 0.5
  n_pos, n_neg = pos.sum(), (~pos).sum()
  return float((r[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def run(args):
  tf_pss.quiet_tensorflow()
  import numpy as np
  meta = load_meta(args.train)
  test_meta = load_meta(args.test)
  num_dense, num_tables, vocab = meta["dense"], meta["tables"], meta["vocab"]
  record_bytes = meta["record_bytes"]
  bottom = [int(w) for w in args.bottom.split(",") if w]
  top = [int(w) for w in args.top.split(",") if w]
  dim = args.dim

  os.makedirs(args.log_dir, exist_ok=True)
  ps_addresses = [f"localhost:{tf_pss.free_port()}" for _ in range(args.ps)]
  worker_addresses = [f"localhost:{tf_pss.free_port()}" for _ in range(args.workers)]
  cluster = {"chief": [f"localhost:{tf_pss.free_port()}"], "ps": ps_addresses,
             "worker": worker_addresses}
  procs = tf_pss.start_servers(args, cluster, args.log_dir)
  try:
    import tensorflow as tf
    tf_pss.wait_for_ports(ps_addresses + worker_addresses, procs)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    partitioner = tf.distribute.experimental.partitioners.FixedShardsPartitioner(args.ps)
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    rng = np.random.default_rng(args.seed)
    t_init = time.time()
    with strategy.scope():
      layers = []  # (kernel, bias) of the bottom MLP, then the top MLP
      widths = [num_dense] + bottom
      for k in range(len(bottom)):
        layers.append((tf.Variable(tf_pss.glorot_uniform(rng, widths[k], widths[k + 1]),
                                   name=f"bottom_{k}/kernel"),
                       tf.Variable(np.zeros(widths[k + 1], np.float32), name=f"bottom_{k}/bias")))
      tables = [tf.Variable(rng.uniform(-0.05, 0.05, (v, dim)).astype(np.float32),
                            name=f"embedding/C{t + 1}") for t, v in enumerate(vocab)]
      widths = [(bottom[-1] if bottom else num_dense) + num_tables * dim] + top + [1]
      for k in range(len(widths) - 1):
        layers.append((tf.Variable(tf_pss.glorot_uniform(rng, widths[k], widths[k + 1]),
                                   name=f"top_{k}/kernel"),
                       tf.Variable(np.zeros(widths[k + 1], np.float32), name=f"top_{k}/bias")))
      dense_shards = [s for pair in layers for v in pair for s in getattr(v, "variables", [v])]
      table_shards = [s for v in tables for s in getattr(v, "variables", [v])]
      accumulators = []
      for s in dense_shards + table_shards:
        with strategy.extended.colocate_vars_with(s):
          accumulators.append(tf.Variable(tf.fill(s.shape, args.initial_accumulator),
                                          name=s.name.split(":")[0] + "/accumulator"))
    init_seconds = time.time() - t_init
    num_bottom = len(bottom)
    lr = tf.constant(args.learning_rate, tf.float32)
    epsilon = tf.constant(1e-7, tf.float32)

    def forward(dense, ids):
      h = dense
      for k in range(num_bottom):
        h = tf.nn.relu(tf.matmul(h, layers[k][0]) + layers[k][1])
      z = tf.concat([h] + [tf.nn.embedding_lookup(tables[t], ids[:, t])
                           for t in range(num_tables)], axis=1)
      for k in range(num_bottom, len(layers)):
        z = tf.matmul(z, layers[k][0]) + layers[k][1]
        if k < len(layers) - 1:
          z = tf.nn.relu(z)
      return tf.reshape(z, [-1])

    all_shards = dense_shards + table_shards

    @tf.function
    def train_step(iterator):
      def step_fn(labels, dense, ids):
        with tf.GradientTape() as tape:
          logits = forward(dense, ids)
          loss = tf.reduce_mean(
              tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, all_shards)
        for var, acc, g in zip(all_shards, accumulators, grads):
          if g is None:
            continue
          if isinstance(g, tf.IndexedSlices):
            unique, position = tf.unique(g.indices)
            summed = tf.math.unsorted_segment_sum(g.values, position, tf.shape(unique)[0])
            tf.raw_ops.ResourceSparseApplyAdagradV2(
                var=var.handle, accum=acc.handle, lr=lr, epsilon=epsilon, grad=summed,
                indices=unique, use_locking=False)
          else:
            tf.raw_ops.ResourceApplyAdagradV2(var=var.handle, accum=acc.handle, lr=lr,
                                              epsilon=epsilon, grad=g, use_locking=False)
        return loss
      loss = tf.constant(0.0)
      for _ in tf.range(steps_per_execution):
        labels, dense, ids = next(iterator)
        loss = strategy.run(step_fn, args=(labels, dense, ids))
      return loss

    steps_per_execution = tf.constant(args.steps_per_execution)
    train_file, batch_size = args.train, args.batch_size

    def dataset_fn():
      def decode(records):
        raw = tf.io.decode_raw(records, tf.uint8)
        n = tf.shape(raw)[0]
        labels = tf.reshape(tf.bitcast(tf.reshape(raw[:, 0:4], [n, 4]), tf.float32), [n])
        dense = tf.bitcast(tf.reshape(raw[:, 4:4 + 4 * num_dense], [n, num_dense, 4]),
                           tf.float32)
        ids = tf.bitcast(tf.reshape(raw[:, 4 + 4 * num_dense:], [n, num_tables, 8]), tf.int64)
        return labels, dense, ids
      ds = tf.data.FixedLengthRecordDataset(train_file, record_bytes)
      ds = ds.shuffle(65536, reshuffle_each_iteration=True)
      return ds.batch(batch_size).map(decode).repeat().prefetch(4)

    test_labels, test_dense, test_ids = read_records(np, args.test, test_meta)

    def evaluate():
      values = [(k.numpy(), b.numpy()) for k, b in layers]
      table_values = [np.concatenate([s.numpy() for s in getattr(t, "variables", [t])])
                      for t in tables]
      h = test_dense
      for k in range(num_bottom):
        h = np.maximum(h @ values[k][0] + values[k][1], 0)
      z = np.concatenate([h] + [table_values[t][test_ids[:, t]] for t in range(num_tables)],
                         axis=1)
      for k in range(num_bottom, len(values)):
        z = z @ values[k][0] + values[k][1]
        if k < len(values) - 1:
          z = np.maximum(z, 0)
      logits = z.reshape(-1).astype(np.float64)
      p = 1 / (1 + np.exp(-logits))
      eps = 1e-7
      logloss = float(-np.mean(test_labels * np.log(p + eps) +
                               (1 - test_labels) * np.log(1 - p + eps)))
      return exact_auc(np, logits, test_labels), logloss

    steps_per_epoch = -(-meta["examples"] // batch_size)
    executions_per_epoch = -(-steps_per_epoch // args.steps_per_execution)
    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iterator = iter(per_worker_dataset)
    train_seconds = 0.0
    evals = []
    # --evals_per_epoch evaluations, evenly spaced: the time-to-AUC curve's points.
    parts = max(1, min(args.evals_per_epoch, executions_per_epoch))
    bounds = [executions_per_epoch * k // parts for k in range(parts + 1)]
    for epoch in range(args.epochs):
      for k in range(parts):
        t0 = time.time()
        for _ in range(bounds[k + 1] - bounds[k]):
          coordinator.schedule(train_step, args=(per_worker_iterator,))
        coordinator.join()
        train_seconds += time.time() - t0
        t1 = time.time()
        auc, logloss = evaluate()
        steps = (epoch * executions_per_epoch + bounds[k + 1]) * args.steps_per_execution
        evals.append({"epoch": epoch + (k + 1) / parts, "steps": steps,
                      "train_seconds": train_seconds, "auc": auc, "logloss": logloss,
                      "eval_seconds": time.time() - t1})
        print(f"tf: epoch {epoch + (k + 1) / parts:.2f}: {train_seconds:.1f} s of training, "
              f"held-out AUC {auc:.4f}, log loss {logloss:.4f}", file=sys.stderr, flush=True)
    examples = executions_per_epoch * args.steps_per_execution * batch_size * args.epochs
    result = {"workers": args.workers, "ps": args.ps, "epochs": args.epochs,
              "examples": examples, "train_seconds": train_seconds,
              "examples_per_s": examples / train_seconds, "init_seconds": init_seconds,
              "evals": evals, "tensorflow": tf.__version__}
    with open(args.out, "w") as f:
      json.dump(result, f)
    print(json.dumps(result))
  finally:
    tf_pss.stop_processes(procs)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--train", required=True)
  parser.add_argument("--test", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--workers", type=int, default=1)
  parser.add_argument("--ps", type=int, default=2)
  parser.add_argument("--epochs", type=int, default=1)
  parser.add_argument("--batch_size", type=int, default=256)
  parser.add_argument("--bottom", default="64,16")
  parser.add_argument("--top", default="64,32")
  parser.add_argument("--dim", type=int, default=16)
  parser.add_argument("--learning_rate", type=float, default=0.05)
  parser.add_argument("--initial_accumulator", type=float, default=0.1)
  parser.add_argument("--seed", type=int, default=5)
  parser.add_argument("--steps_per_execution", type=int, default=10)
  parser.add_argument("--evals_per_epoch", type=int, default=1,
                      help="held-out evaluations per epoch (the clock stops for each)")
  parser.add_argument("--worker_threads", type=int, default=0)
  parser.add_argument("--ps_threads", type=int, default=0)
  parser.add_argument("--log_dir", default="/tmp/tf_ctr")
  args = parser.parse_args()
  run(args)


if __name__ == "__main__":
  main()

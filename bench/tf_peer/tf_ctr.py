#!/usr/bin/env python3
"""TensorFlow's ParameterServerStrategy on the click model that bench/ctr_vs_tf.sh trains with
shardps: one run, as the peer that shardps' examples/s and AUC are measured against.

  python tf_ctr.py --train TRAIN.bin --test TEST.bin --workers N --out RUN.json [--epochs 1]

The data are `ctr_tool export` files (fixed-size records: f32 label, f32 dense[D], i64 id per
table; F.json beside F.bin gives D, the tables' vocabularies and the record size), made from
the same synthetic_ctr spec as shardps' job, so both train on the same examples.

The cluster is real processes on loopback, as in tf_pss.py (whose `server` mode runs each ps
and worker): 2 ps and N workers, and the coordinator (ParameterServerStrategy +
ClusterCoordinator) in this process. Set up as TensorFlow's users tune it (issue 22 measured
each; bench/ctr_vs_tf.sh tries them side by side): --tables fused (one variable holding every
feature's rows at per-feature offsets, so a step makes one gather and one sparse apply per
shard instead of one per table), --partitioner min_size (MinSizePartitioner(256 KiB, --ps
shards at most): the small dense variables stay whole), --steps_per_execution 20 traced as a
Python loop (--loop range: a tf.range while-loop, tf_keras' shape). --tables separate
--partitioner fixed --steps_per_execution 10 --loop range is the set-up this file had before.
Keras' model.fit is not among them: Keras 3 (the one TensorFlow 2.21 ships) does not support
ParameterServerStrategy (keras-team/keras#18624); tf_keras' model.fit measured 13.1k
examples/s in issue 22, below the fused table's 24-27k.

The model, as shardps' `dlrm:bottom=64,16;top=64,32;dim=16;interaction=concat;pooling=sum`
(model/dlrm/dlrm_spec.h): one table per feature [vocab, dim] (or their rows in one fused
table), uniform(-0.05, 0.05); a bottom MLP over the dense features with ReLU on every layer;
the bottom output and the tables' rows concatenated; a top MLP with ReLU on its hidden layers
and one logit; sigmoid, mean log loss. Kernels Glorot-uniform, biases 0. Adagrad as
TensorFlow's ResourceApplyAdagradV2 (acc += g^2; w -= lr g / (sqrt(acc) + eps)),
accumulators starting at --initial_accumulator, the tables' rows updated sparsely
(ResourceSparseApplyAdagradV2, a batch's duplicate ids summed first, as Keras does), which is
shardps' row-sparse Adagrad.

Each worker reads the training file with tf.data, shuffles it (a buffer of 65536 examples,
reshuffled every epoch) and cuts batches of --batch_size. The clock starts once the
variables exist, right before the per-worker datasets are made and the first function is
scheduled. Evaluation (--evals_per_epoch, every ceil(steps per epoch / that) steps, and a
final one), as shardps' evaluator does it: concurrently (--eval concurrent), a thread of this
process polls the ps' step counter every 200 ms, reads the dense variables and gathers the
held-out examples' rows from the ps, and computes the held-out AUC (exact, ties averaged)
and log loss in numpy, stamped with the clock when its read began; --eval paused stops the
clock for each instead. The points of the time-to-AUC curve.
"""

import argparse
import json
import os
import sys
import threading
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
  _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
  # The average rank (1-based) of each distinct score, then of each example.
  ends = np.cumsum(counts)
  average = ends - (counts - 1) / 2.0
  r = average[inverse]
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
    if args.partitioner == "fixed":
      partitioner = tf.distribute.experimental.partitioners.FixedShardsPartitioner(args.ps)
    else:
      partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
          min_shard_bytes=args.min_shard_bytes, max_shards=args.ps)
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    rng = np.random.default_rng(args.seed)
    t_init = time.time()
    # A fused table holds every feature's rows, feature t's at offsets[t] on.
    offsets = np.concatenate([[0], np.cumsum(vocab)[:-1]]).astype(np.int64)
    with strategy.scope():
      layers = []  # (kernel, bias) of the bottom MLP, then the top MLP
      widths = [num_dense] + bottom
      for k in range(len(bottom)):
        layers.append((tf.Variable(tf_pss.glorot_uniform(rng, widths[k], widths[k + 1]),
                                   name=f"bottom_{k}/kernel"),
                       tf.Variable(np.zeros(widths[k + 1], np.float32), name=f"bottom_{k}/bias")))
      if args.tables == "fused":
        tables = [tf.Variable(rng.uniform(-0.05, 0.05, (int(sum(vocab)), dim)).astype(np.float32),
                              name="embedding/fused")]
      else:
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
      # Steps applied so far (added once per function), read by the evaluation thread.
      iterations = tf.Variable(0, dtype=tf.int64, name="iterations")
    init_seconds = time.time() - t_init
    num_bottom = len(bottom)
    lr = tf.constant(args.learning_rate, tf.float32)
    epsilon = tf.constant(1e-7, tf.float32)
    fused_offsets = tf.constant(offsets)

    def embed(ids):
      if args.tables == "fused":
        # One gather for all features: ids shifted to their feature's rows.
        rows = tf.nn.embedding_lookup(tables[0], ids + fused_offsets)
        return [tf.reshape(rows, [-1, num_tables * dim])]
      return [tf.nn.embedding_lookup(tables[t], ids[:, t]) for t in range(num_tables)]

    def forward(dense, ids):
      h = dense
      for k in range(num_bottom):
        h = tf.nn.relu(tf.matmul(h, layers[k][0]) + layers[k][1])
      z = tf.concat([h] + embed(ids), axis=1)
      for k in range(num_bottom, len(layers)):
        z = tf.matmul(z, layers[k][0]) + layers[k][1]
        if k < len(layers) - 1:
          z = tf.nn.relu(z)
      return tf.reshape(z, [-1])

    all_shards = dense_shards + table_shards

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

    def run_steps(iterator, count):
      loss = tf.constant(0.0)
      if args.loop == "range":
        # tf_keras' train_function shape: a while-loop whose count is a tensor.
        for _ in tf.range(tf.constant(count)):
          labels, dense, ids = next(iterator)
          loss = strategy.run(step_fn, args=(labels, dense, ids))
      else:
        # Traced into `count` copies of the step.
        for _ in range(count):
          labels, dense, ids = next(iterator)
          loss = strategy.run(step_fn, args=(labels, dense, ids))
      iterations.assign_add(count)
      return loss

    def make_train_function(count):
      return tf.function(lambda iterator: run_steps(iterator, count))

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
    # The held-out examples' rows only: a gather on the ps, not a read of whole tables.
    if args.tables == "fused":
      test_rows = [np.unique(test_ids + offsets)]
    else:
      test_rows = [np.unique(test_ids[:, t]) for t in range(num_tables)]

    def evaluate():
      values = [(k.numpy(), b.numpy()) for k, b in layers]
      gathered = [tf.nn.embedding_lookup(table, tf.constant(rows)).numpy()
                  for table, rows in zip(tables, test_rows)]
      h = test_dense
      for k in range(num_bottom):
        h = np.maximum(h @ values[k][0] + values[k][1], 0)
      if args.tables == "fused":
        position = np.searchsorted(test_rows[0], test_ids + offsets)
        embedded = [gathered[0][position].reshape(len(test_ids), num_tables * dim)]
      else:
        embedded = [gathered[t][np.searchsorted(test_rows[t], test_ids[:, t])]
                    for t in range(num_tables)]
      z = np.concatenate([h] + embedded, axis=1)
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
    total_steps = steps_per_epoch * args.epochs
    eval_every = -(-steps_per_epoch // args.evals_per_epoch)
    evals = []
    progress = {"error": None}

    def record(clock, step, final):
      auc, logloss = evaluate()
      evals.append({"epoch": step / steps_per_epoch, "steps": step, "train_seconds": clock,
                    "auc": auc, "logloss": logloss, "final": final})
      print(f"tf: step {step}: {clock:.1f} s of training, held-out AUC {auc:.4f}, "
            f"log loss {logloss:.4f}", file=sys.stderr, flush=True)

    # ---- the clock starts: the variables exist; training begins.
    t0 = time.time()
    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iterator = iter(per_worker_dataset)
    stop = threading.Event()

    def eval_loop():
      # Concurrent, as shardps' evaluator: every eval_every steps, the variables as read now,
      # stamped with the clock when the read began.
      last = 0
      try:
        while not stop.is_set():
          step = int(iterations.numpy())
          if step - last >= eval_every:
            record(time.time() - t0, step, False)
            last = step
          stop.wait(0.2)
      except Exception as e:  # reported in the run's JSON
        progress["error"] = repr(e)

    eval_thread = None
    if args.eval == "concurrent":
      eval_thread = threading.Thread(target=eval_loop, daemon=True)
      eval_thread.start()
    train_function = make_train_function(args.steps_per_execution)
    paused = 0.0  # --eval paused: seconds the clock stood still
    scheduled = 0
    next_eval = eval_every
    while scheduled < total_steps:
      count = min(args.steps_per_execution, total_steps - scheduled)
      coordinator.schedule(train_function if count == args.steps_per_execution
                           else make_train_function(count), args=(per_worker_iterator,))
      scheduled += count
      if args.eval == "paused" and scheduled >= next_eval and scheduled < total_steps:
        coordinator.join()
        t1 = time.time()
        record(t1 - t0 - paused, scheduled, False)
        paused += time.time() - t1
        next_eval += eval_every
    coordinator.join()
    train_seconds = time.time() - t0 - paused
    stop.set()
    if eval_thread is not None:
      eval_thread.join()
    record(train_seconds, int(iterations.numpy()), True)
    examples = meta["examples"] * args.epochs
    result = {"workers": args.workers, "ps": args.ps, "epochs": args.epochs,
              "examples": examples, "train_seconds": train_seconds,
              "examples_per_s": examples / train_seconds, "init_seconds": init_seconds,
              "setup": {"tables": args.tables, "partitioner": args.partitioner,
                        "steps_per_execution": args.steps_per_execution, "loop": args.loop,
                        "eval": args.eval, "worker_threads": args.worker_threads},
              "placement": [{"name": v.name, "shape": v.shape.as_list(), "device": v.device}
                            for v in all_shards],
              "eval_error": progress["error"],
              "evals": evals, "tensorflow": tf.__version__}
    with open(args.out, "w") as f:
      json.dump(result, f)
    print(json.dumps({k: v for k, v in result.items() if k not in ("evals", "placement")}))
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
  parser.add_argument("--tables", choices=["fused", "separate"], default="fused",
                      help="one table holding every feature's rows at per-feature offsets, or "
                           "one table per feature")
  parser.add_argument("--partitioner", choices=["min_size", "fixed"], default="min_size",
                      help="MinSizePartitioner(--min_shard_bytes, --ps shards at most), or "
                           "FixedShardsPartitioner(--ps) for every variable")
  parser.add_argument("--min_shard_bytes", type=int, default=256 << 10)
  parser.add_argument("--steps_per_execution", type=int, default=20)
  parser.add_argument("--loop", choices=["unrolled", "range"], default="unrolled",
                      help="a function's steps as a Python loop traced into copies, or a "
                           "tf.range while-loop")
  parser.add_argument("--evals_per_epoch", type=int, default=4,
                      help="held-out evaluations per epoch")
  parser.add_argument("--eval", choices=["concurrent", "paused"], default="concurrent",
                      help="evaluate beside the training (shardps' evaluator does) or with "
                           "the clock stopped")
  parser.add_argument("--worker_threads", type=int, default=0)
  parser.add_argument("--ps_threads", type=int, default=0)
  parser.add_argument("--log_dir", default="/tmp/tf_ctr")
  args = parser.parse_args()
  run(args)
  # The servers are gone: skip TensorFlow's teardown (tf_pss.py says why).
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)


if __name__ == "__main__":
  main()

#!/usr/bin/env python3
"""TensorFlow's ParameterServerStrategy on the job that bench/time_to_accuracy trains with
shardps: one run, as the peer that shardps' time to accuracy is measured against.

  python tf_pss.py run --workers N --out RUN.json [--epochs 10] [--data_dir D] ...

The cluster is real processes on loopback: 2 ps and N workers, each a tf.distribute.Server
in its own Python process (this file, `server` mode), and the coordinator (the "chief" task:
ParameterServerStrategy + ClusterCoordinator) in this process. An evaluator process
(numpy_eval.py) evaluates the full test set concurrently, as shardps' evaluator daemon does.

The job, as shardps' job file spells it (coordinator/job_spec.h):
- model: MLP 784-256-128-10, ReLU, softmax cross-entropy (mean over the batch), float32;
  kernels glorot_uniform (limit sqrt(6 / (fan_in + fan_out))), biases zero.
- data: Fashion-MNIST's IDX files from the data directory, read on each worker by tf.data
  (FixedLengthRecordDataset over the .gz files, pixels / 255); each worker shuffles the whole
  training set every epoch and cuts it into batches of 256 (the last one of an epoch holds
  the remaining 96), as shardps' Batcher does.
- optimizer: Adam, learning rate 0.001, beta1 0.9, beta2 0.999, epsilon 1e-7, no decay,
  applied on the ps by ResourceApplyAdam: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t),
  m += (g - m)(1 - beta1), v += (g^2 - v)(1 - beta2), var -= lr_t m / (sqrt(v) + epsilon), the
  ps' formula in shardps (math/optimizer.cc); t counts applied steps.
- variables: TensorFlow's MinSizePartitioner(256 KiB, 4 shards) and round-robin placement,
  which is shardps' default partitioner ("min_size:262144:4") and placement ("round_robin").
  Adam's slots sit beside their variable's shard.
- steps: epochs x ceil(60000 / 256) steps of one batch each, scheduled on whichever worker is
  free (ClusterCoordinator.schedule), async (TensorFlow's only mode).

The clock starts once the variables exist on the ps, right before the per-worker datasets
are created and the first step is scheduled. Every ~200 ms a thread of the coordinator reads
the ps' step counter; once 100 steps (--eval_every_steps) have been applied since the last
evaluation it reads every variable from the ps and hands the values to the evaluator process,
waiting for its answer before it looks again, as shardps' evaluator polls its chief. The
evaluator appends one JSON line per evaluation, timed when the evaluation ends, in shardps'
metrics file format; the run's JSON (--out) gives the clock's start and the records.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
NUM_TRAIN = 60000
HIDDEN = (256, 128)
INPUT_DIM = 784
NUM_CLASSES = 10


def quiet_tensorflow():
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def die_with_parent():
  """Linux: this process gets SIGKILL when the process that started it ends, so that no
  TensorFlow server outlives a coordinator that was killed."""
  try:
    import ctypes
    import signal
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
  except OSError:
    pass


def free_port():
  """A port free a moment ago on every interface (tf.distribute.Server binds all of them)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("", 0))
    return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# server mode: one ps or worker task


def serve(args):
  die_with_parent()
  quiet_tensorflow()
  import tensorflow as tf
  cluster = tf.train.ClusterSpec(json.loads(args.cluster))
  config = tf.compat.v1.ConfigProto()
  if args.intra_op_threads > 0:
    config.intra_op_parallelism_threads = args.intra_op_threads
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
  if args.inter_op_threads > 0:
    config.inter_op_parallelism_threads = args.inter_op_threads
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
  server = tf.distribute.Server(cluster, job_name=args.type, task_index=args.index,
                                protocol="grpc", config=config, start=True)
  print(f"{args.type} {args.index} serving at {server.target}", file=sys.stderr, flush=True)
  server.join()


# ---------------------------------------------------------------------------------------------
# run mode: the coordinator


def start_servers(args, cluster, log_dir):
  procs = []
  for task_type, count in (("ps", args.ps), ("worker", args.workers)):
    for index in range(count):
      threads = args.worker_threads if task_type == "worker" else args.ps_threads
      cmd = [sys.executable, os.path.abspath(__file__), "server", "--type", task_type,
             "--index", str(index), "--cluster", json.dumps(cluster),
             "--intra_op_threads", str(threads)]
      log = open(os.path.join(log_dir, f"tf_{task_type}{index}.log"), "w")
      procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
  return procs


def stop_processes(procs):
  for p in procs:
    if p.poll() is None:
      p.terminate()
  deadline = time.time() + 10
  for p in procs:
    try:
      p.wait(timeout=max(0.1, deadline - time.time()))
    except subprocess.TimeoutExpired:
      p.kill()
      p.wait()


def wait_for_ports(addresses, procs, timeout_s=120):
  deadline = time.time() + timeout_s
  for address in addresses:
    host, port = address.rsplit(":", 1)
    while True:
      for p in procs:
        if p.poll() is not None:
          raise RuntimeError(f"a TensorFlow server exited with {p.returncode} at start")
      try:
        with socket.create_connection((host, int(port)), timeout=1):
          break
      except OSError:
        if time.time() > deadline:
          raise RuntimeError(f"no TensorFlow server at {address} after {timeout_s} s")
        time.sleep(0.05)


class Evaluator:
  """The evaluator process (numpy_eval.py) over a pipe: values in, one metrics line out."""

  def __init__(self, args, metrics_file):
    env = dict(os.environ)
    # One compute thread, as shardps' evaluator daemon (--threads=1) has.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
      env[var] = "1"
    self.proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "numpy_eval.py"), "--data_dir", args.data_dir,
         "--metrics_file", metrics_file, "--job_id", args.job_id],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

  def evaluate(self, step, values, final):
    import numpy as np
    header = {"step": int(step), "final": bool(final), "consistent": False,
              "shapes": [list(v.shape) for v in values]}
    self.proc.stdin.write((json.dumps(header) + "\n").encode())
    for v in values:
      self.proc.stdin.write(np.ascontiguousarray(v, dtype=np.float32).tobytes())
    self.proc.stdin.flush()
    line = self.proc.stdout.readline()
    if not line:
      raise RuntimeError("the evaluator process ended")
    return json.loads(line)

  def close(self):
    if self.proc.poll() is None:
      self.proc.stdin.close()
      self.proc.wait(timeout=30)


def glorot_uniform(rng, fan_in, fan_out):
  import numpy as np
  limit = np.sqrt(6.0 / (fan_in + fan_out))
  return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)


def run(args):
  quiet_tensorflow()
  import numpy as np
  os.makedirs(args.log_dir, exist_ok=True)
  ps_addresses = [f"localhost:{free_port()}" for _ in range(args.ps)]
  worker_addresses = [f"localhost:{free_port()}" for _ in range(args.workers)]
  cluster = {"chief": [f"localhost:{free_port()}"], "ps": ps_addresses,
             "worker": worker_addresses}
  procs = start_servers(args, cluster, args.log_dir)
  evaluator = None
  try:
    import tensorflow as tf
    if args.coordinator_threads > 0:
      tf.config.threading.set_intra_op_parallelism_threads(args.coordinator_threads)
    wait_for_ports(ps_addresses + worker_addresses, procs)
    metrics_file = os.path.join(args.log_dir, "tf_metrics.jsonl")
    if os.path.exists(metrics_file):
      os.remove(metrics_file)
    evaluator = Evaluator(args, metrics_file)

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=args.min_shard_bytes, max_shards=args.max_shards)
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    # Variables in shardps' order (Params(model): kernel, then bias, per layer), so that
    # round-robin placement puts the same shards on the same ps.
    rng = np.random.default_rng(args.seed)
    dims = (INPUT_DIM,) + HIDDEN + (NUM_CLASSES,)
    params = []
    with strategy.scope():
      if args.model == "cnn":
        # examples/fashion_cnn.py's CNN as Keras' Conv2D and Dense layers hold it: kernels
        # glorot_uniform (a conv's fans: 9 x in, 9 x out channels), biases zero.
        for name, shape in (("conv_0", (3, 3, 1, 32)), ("conv_1", (3, 3, 32, 64)),
                            ("dense_0", (7 * 7 * 64, 128)), ("dense_1", (128, NUM_CLASSES))):
          field = int(np.prod(shape[:-2])) if len(shape) == 4 else 1
          limit = np.sqrt(6.0 / (field * shape[-2] + field * shape[-1]))
          params.append(tf.Variable(rng.uniform(-limit, limit, size=shape).astype(np.float32),
                                    name=f"{name}/kernel"))
          params.append(tf.Variable(np.zeros(shape[-1], np.float32), name=f"{name}/bias"))
      for layer in range(len(dims) - 1 if args.model == "mlp" else 0):
        params.append(tf.Variable(glorot_uniform(rng, dims[layer], dims[layer + 1]),
                                  name=f"dense_{layer}/kernel"))
        params.append(tf.Variable(np.zeros(dims[layer + 1], np.float32),
                                  name=f"dense_{layer}/bias"))
      shards = [s for p in params for s in getattr(p, "variables", [p])]
      slots = []
      for s in shards:
        with strategy.extended.colocate_vars_with(s):
          slots.append((tf.Variable(tf.zeros(s.shape), name=s.name.split(":")[0] + "/m"),
                        tf.Variable(tf.zeros(s.shape), name=s.name.split(":")[0] + "/v")))
      iterations = tf.Variable(0, dtype=tf.int64, name="iterations")
    placement = [{"name": s.name, "shape": s.shape.as_list(), "device": s.device}
                 for s in shards]

    lr = tf.constant(args.learning_rate, tf.float32)
    beta1 = tf.constant(0.9, tf.float32)
    beta2 = tf.constant(0.999, tf.float32)
    epsilon = tf.constant(1e-7, tf.float32)

    def model(x):
      if args.model == "cnn":
        h = tf.reshape(x, [-1, 28, 28, 1])
        for layer in range(2):
          h = tf.nn.relu(tf.nn.conv2d(h, params[2 * layer], 1, "SAME") + params[2 * layer + 1])
          h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 7 * 7 * 64]), params[4]) + params[5])
        return tf.matmul(h, params[6]) + params[7]
      h = x
      for layer in range(len(dims) - 1):
        h = tf.matmul(h, params[2 * layer]) + params[2 * layer + 1]
        if layer < len(dims) - 2:
          h = tf.nn.relu(h)
      return h

    def make_train_function(count):
      """A tf.function that runs `count` steps on a worker (count is fixed when traced)."""
      return tf.function(lambda iterator: run_steps(iterator, count))

    def run_steps(iterator, count):
      def step_fn(x, y):
        with tf.GradientTape() as tape:
          logits = model(x)
          loss = tf.reduce_mean(
              tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, shards)
        t = tf.cast(iterations.assign_add(1), tf.float32)
        beta1_power = tf.pow(beta1, t)
        beta2_power = tf.pow(beta2, t)
        for var, (m, v), g in zip(shards, slots, grads):
          tf.raw_ops.ResourceApplyAdam(
              var=var.handle, m=m.handle, v=v.handle, beta1_power=beta1_power,
              beta2_power=beta2_power, lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon,
              grad=g, use_locking=True)
        return loss
      if args.loop == "range":
        # A graph while-loop whose count is a tensor (tf_keras' train_function has this
        # shape): one copy of the step in the graph, but every iteration, even a single one,
        # pays the loop's control flow (tensorflow#46387).
        loss = tf.constant(0.0)
        for _ in tf.range(tf.constant(count)):
          x, y = next(iterator)
          loss = strategy.run(step_fn, args=(x, y))
        return loss
      # A Python loop, traced into `count` copies of the step: no loop at all for one step.
      for _ in range(count):
        x, y = next(iterator)
        loss = strategy.run(step_fn, args=(x, y))
      return loss

    data_dir = args.data_dir
    batch_size = args.batch_size

    def dataset_fn():
      images = tf.data.FixedLengthRecordDataset(
          os.path.join(data_dir, "train-images-idx3-ubyte.gz"), INPUT_DIM, header_bytes=16,
          compression_type="GZIP")
      labels = tf.data.FixedLengthRecordDataset(
          os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 1, header_bytes=8,
          compression_type="GZIP")

      def decode(image, label):
        x = tf.cast(tf.io.decode_raw(image, tf.uint8), tf.float32) / 255.0
        y = tf.cast(tf.io.decode_raw(label, tf.uint8)[0], tf.int32)
        return tf.reshape(x, [INPUT_DIM]), y

      ds = tf.data.Dataset.zip((images, labels)).map(decode).cache()
      # A new order every epoch, and another on each worker (no seed: TensorFlow draws one).
      ds = ds.shuffle(NUM_TRAIN, reshuffle_each_iteration=True)
      return ds.batch(batch_size).repeat().prefetch(2)

    steps_per_epoch = -(-NUM_TRAIN // batch_size)
    total_steps = args.steps if args.steps > 0 else steps_per_epoch * args.epochs
    examples = (total_steps // steps_per_epoch) * NUM_TRAIN + min(
        (total_steps % steps_per_epoch) * batch_size, NUM_TRAIN)

    # ---- the clock starts: the variables exist; training begins.
    t0 = time.time()
    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iterator = iter(per_worker_dataset)

    stop = threading.Event()
    progress = {"first_step_time": None, "evals": 0, "error": None}

    def read_values():
      values = []
      for p in params:
        parts = getattr(p, "variables", [p])
        values.append(np.concatenate([s.numpy() for s in parts], axis=0))
      return values

    def eval_loop():
      last = -1
      try:
        while not stop.is_set():
          step = int(iterations.numpy())
          if step > 0 and progress["first_step_time"] is None:
            progress["first_step_time"] = time.time()
          if last < 0 or step - last >= args.eval_every_steps:
            evaluator.evaluate(step, read_values(), final=False)
            progress["evals"] += 1
            last = step
          # Until the first step is seen, poll often: it times the workers' start.
          stop.wait(args.eval_poll_s if progress["first_step_time"] is not None else 0.02)
      except Exception as e:  # reported in the run's JSON; the run goes on
        progress["error"] = repr(e)

    eval_thread = threading.Thread(target=eval_loop, daemon=True)
    eval_thread.start()
    # Whole functions of steps_per_execution steps, and one function for the steps left over.
    train_function = make_train_function(args.steps_per_execution)
    for _ in range(total_steps // args.steps_per_execution):
      coordinator.schedule(train_function, args=(per_worker_iterator,))
    if total_steps % args.steps_per_execution:
      coordinator.schedule(make_train_function(total_steps % args.steps_per_execution),
                           args=(per_worker_iterator,))
    coordinator.join()
    t_end = time.time()
    stop.set()
    eval_thread.join()
    final_step = int(iterations.numpy())
    final = evaluator.evaluate(final_step, read_values(), final=True)
    evaluator.close()
    with open(metrics_file) as f:
      records = [json.loads(line) for line in f if line.strip()]

    result = {
        "system": "tensorflow",
        "tensorflow_version": tf.__version__,
        "workers": args.workers,
        "ps": args.ps,
        "mode": "async",
        "start_time": t0,
        "train_s": t_end - t0,
        "first_step_s": (progress["first_step_time"] - t0
                         if progress["first_step_time"] is not None else None),
        "steps": final_step,
        "examples": examples,
        "examples_per_s": examples / (t_end - t0),
        "final_accuracy": final["accuracy"],
        "eval_error": progress["error"],
        "placement": placement,
        "threads": {"worker_intra_op": args.worker_threads, "ps_intra_op": args.ps_threads},
        "records": records,
    }
    with open(args.out, "w") as f:
      json.dump(result, f)
    print(f"tf_pss: {args.workers} worker(s): {final_step} steps in {t_end - t0:.1f} s, "
          f"final test accuracy {final['accuracy']:.4f}", file=sys.stderr)
  finally:
    if evaluator is not None and evaluator.proc.poll() is None:
      evaluator.proc.kill()
    stop_processes(procs)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="mode", required=True)
  s = sub.add_parser("server", help="one ps or worker task (started by run)")
  s.add_argument("--type", required=True, choices=["ps", "worker"])
  s.add_argument("--index", type=int, required=True)
  s.add_argument("--cluster", required=True)
  s.add_argument("--intra_op_threads", type=int, default=0)
  s.add_argument("--inter_op_threads", type=int, default=0)
  r = sub.add_parser("run", help="one training run; its JSON to --out")
  r.add_argument("--workers", type=int, default=1)
  r.add_argument("--ps", type=int, default=2)
  r.add_argument("--epochs", type=int, default=10)
  r.add_argument("--steps", type=int, default=0, help="instead of --epochs")
  r.add_argument("--batch_size", type=int, default=256)
  r.add_argument("--learning_rate", type=float, default=0.001)
  r.add_argument("--model", choices=["mlp", "cnn"], default="mlp",
                 help="the MLP 784-256-128-10, or examples/fashion_cnn.py's CNN")
  r.add_argument("--seed", type=int, default=42)
  r.add_argument("--min_shard_bytes", type=int, default=262144)
  r.add_argument("--max_shards", type=int, default=4)
  r.add_argument("--steps_per_execution", type=int, default=1,
                 help="training steps in one scheduled function (Keras' steps_per_execution)")
  r.add_argument("--loop", choices=["unrolled", "range"], default="unrolled",
                 help="how a function runs its steps: a Python loop traced into that many "
                      "copies, or a tf.range while-loop")
  r.add_argument("--eval_every_steps", type=int, default=100)
  r.add_argument("--eval_poll_s", type=float, default=0.2)
  r.add_argument("--worker_threads", type=int, default=1,
                 help="intra-op threads of each worker (shardps' workers compute on 1)")
  r.add_argument("--ps_threads", type=int, default=0, help="intra-op threads of each ps (0: TF's)")
  r.add_argument("--coordinator_threads", type=int, default=0)
  r.add_argument("--data_dir", default=DEFAULT_DATA_DIR)
  r.add_argument("--job_id", default="tf-pss")
  r.add_argument("--log_dir", default="/tmp/tf_pss")
  r.add_argument("--out", required=True)
  args = parser.parse_args()
  if args.mode == "server":
    serve(args)
  else:
    run(args)
    # The servers are gone: skip TensorFlow's teardown, which would only log that it cannot
    # reach them to remove the functions it registered there.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
  main()

"""shardps.Client: the parameters on the ps, from Python, over shardps' C++ client.

    import numpy as np, shardps

    with shardps.Client() as ps:                      # the ps tasks of $TF_CONFIG
        ps.create_variables([
            shardps.Variable("w", (784, 10), initializer="glorot_uniform",
                             optimizer={"type": "adam", "learning_rate": 1e-3}),
            shardps.Variable("emb", (None, 16), optimizer="adagrad"),  # dynamic (hashed keys)
        ], partitioner="min_size:262144:2")
        w = ps.pull("w")                               # float32 array, shape (784, 10)
        ps.push("w", np.ones_like(w))                  # a gradient: the ps applies Adam
        rows = ps.pull_rows("emb", [7, 1 << 40, 7])    # shape (3, 16)

Values cross without copies: float32 C-contiguous arrays are read (pushes) or written
(``out=``) in place, and pulled results own the buffer the C++ client wrote. Other value
arrays are refused with ``shardps.InvalidArgument`` naming the argument, never cast; ids may
be any integer array or list (cast to int64; unsigned keys keep their bits). Every wait
releases the GIL, and Ctrl-C interrupts it within about 0.1 s.
"""

import json
import os

import numpy as np

from shardps import _core
from shardps.errors import InvalidArgument

Versions = _core.Versions

_DEFAULT_NUM_BUCKETS = 4096  # partitioners/buckets.h kDefaultNumBuckets


def _json(value, what):
    """An optimizer or initializer (a dict, a type name or None) as JSON for the extension,
    which parses it as a job file's (coordinator/job_spec.h)."""
    if value is not None and not isinstance(value, (dict, str)):
        raise InvalidArgument(f"{what}: expected a dict or a type name, got "
                              f"{type(value).__name__}")
    return json.dumps(value)


def _update_json(value, what):
    """An update (a dict of UpdateSpec's fields, a mode name or None) as protobuf JSON."""
    if value is None:
        value = {}
    elif isinstance(value, str):
        value = {"mode": value}
    elif not isinstance(value, dict):
        raise InvalidArgument(f"{what}: expected a dict or a mode name, got "
                              f"{type(value).__name__}")
    spec = dict(value)
    for field in ("mode", "staleness_lr"):
        if isinstance(spec.get(field), str):
            spec[field] = spec[field].upper()
    return json.dumps(spec)


class Variable:
    """A variable to create on the ps tasks.

    shape: the full shape; ``(None, dim)`` (or ``dynamic=``) makes a dynamic table keyed by
    any int64 (hashed ids), whose rows exist once pushed.
    initializer, optimizer: as a job file's "kernel_initializer" and "optimizer" (the same
    names, defaults and checks: docs/jobs.md), a dict or just a type name:
    ``"glorot_uniform"``, ``{"type": "adam", "learning_rate": 1e-3}``; default glorot_uniform
    (seeded with ``seed``; a dynamic table's: random_uniform in [-0.05, 0.05), as Keras'
    Embedding) and adam with learning rate 0.001.
    update: UpdateSpec's fields (proto/ps.proto), e.g. ``{"mode": "sync", "num_replicas": 2}``;
    default async.
    dynamic: True or a dict of num_buckets, admit_after, ttl_steps, max_rows.
    """

    def __init__(self, name, shape, initializer=None, optimizer=None, update=None,
                 dynamic=None, seed=42):
        self.name = name
        self.seed = seed
        shape = tuple(shape)
        if shape and shape[0] is None:
            shape = (0,) + shape[1:]
            if dynamic is None:
                dynamic = True
        self.shape = shape
        self.initializer = initializer
        self.optimizer = optimizer
        self.update = update
        self.dynamic = dynamic

    def to_spec(self, index):
        what = f"variables[{index}] (\"{self.name}\")"
        try:
            shape = [int(d) for d in self.shape]
        except (TypeError, ValueError):
            raise InvalidArgument(f"{what}.shape: expected integers, got {self.shape!r}") from None
        dynamic = None
        if self.dynamic:
            options = {} if self.dynamic is True else dict(self.dynamic)
            unknown = set(options) - {"num_buckets", "admit_after", "ttl_steps", "max_rows"}
            if unknown:
                raise InvalidArgument(f"{what}.dynamic: unknown option {sorted(unknown)[0]!r} "
                                      "(num_buckets, admit_after, ttl_steps, max_rows)")
            dynamic = {"num_buckets": int(options.get("num_buckets", _DEFAULT_NUM_BUCKETS)),
                       "admit_after": int(options.get("admit_after", 0)),
                       "ttl_steps": int(options.get("ttl_steps", 0)),
                       "max_rows": int(options.get("max_rows", 0))}
        return {"name": str(self.name), "shape": shape,
                "initializer": _json(self.initializer if self.initializer is not None or
                                     not dynamic else "random_uniform", f"{what}.initializer"),
                "optimizer": _json(self.optimizer, f"{what}.optimizer"),
                "update": _update_json(self.update, f"{what}.update"),
                "seed": int(self.seed), "dynamic": dynamic}

    def __repr__(self):
        return f"Variable({self.name!r}, {self.shape!r})"


def ps_addresses(tf_config=None):
    """The ps tasks' addresses in TF_CONFIG (a JSON string or dict; default: $TF_CONFIG)."""
    if tf_config is None:
        tf_config = os.environ.get("TF_CONFIG")
        if not tf_config:
            raise InvalidArgument("TF_CONFIG is not set: pass ps=[...] or tf_config=")
    if isinstance(tf_config, str):
        try:
            tf_config = json.loads(tf_config)
        except ValueError as e:
            raise InvalidArgument(f"TF_CONFIG: not JSON: {e}") from None
    ps = tf_config.get("cluster", {}).get("ps") if isinstance(tf_config, dict) else None
    if not ps or not all(isinstance(a, str) for a in ps):
        raise InvalidArgument("TF_CONFIG: cluster.ps: expected a non-empty list of host:port")
    return list(ps)


def _ids(ids, what):
    array = np.asarray(ids)
    if array.size == 0 and array.dtype.kind == "f":
        array = array.astype(np.int64)  # [] comes out as float64
    if array.dtype.kind not in "iu":
        raise InvalidArgument(f"{what}: expected integer ids, got {array.dtype}")
    if array.ndim != 1:
        raise InvalidArgument(f"{what}: expected one dimension of ids, got shape {array.shape}")
    if array.dtype == np.uint64:
        return np.ascontiguousarray(array).view(np.int64)
    return np.ascontiguousarray(array, dtype=np.int64)


def _push_args(step, replica, idempotency_key, generation, base_versions, job_step):
    return _core._PushArgs(step, replica, idempotency_key, generation, base_versions,
                           None if job_step is None else int(job_step))


class Client:
    """A client of the ps tasks ``ps`` (host:port, in task order; default: TF_CONFIG's)."""

    def __init__(self, ps=None, *, tf_config=None, rpc_timeout=60.0, max_attempts=6,
                 max_chunk_bytes=4 << 20, connections_per_ps=2):
        if ps is None:
            ps = ps_addresses(tf_config)
        self._c = _core._Client(list(ps), float(rpc_timeout), int(max_attempts),
                                int(max_chunk_bytes), int(connections_per_ps))

    @classmethod
    def _wrap(cls, core_client):
        """A Client over the extension's client (a Worker's job's)."""
        client = cls.__new__(cls)
        client._c = core_client
        return client

    def close(self):
        """Waits for interrupted calls (at most 30 s) and closes the connections."""
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def num_ps(self):
        return self._c.num_ps

    def create_variables(self, variables, partitioner="min_size:262144:1",
                         placement="round_robin"):
        """Partitions, places and creates ``variables`` (Variable) on the ps tasks, as a job
        file's variables are (partitioner "fixed:N", "min_size[:bytes[:max_shards]]",
        "max_size:bytes[:max_shards]"; placement "round_robin" or "by_bytes"). Creating an
        identical variable again succeeds without change."""
        specs = [v.to_spec(i) for i, v in enumerate(variables)]
        self._c.create_variables(specs, partitioner, placement)

    def discover(self):
        """Learns every variable's layout from what the ps tasks hold."""
        self._c.discover()

    def variables(self):
        return self._c.variable_names()

    def layout(self, name):
        """The variable's shape and shards (name, ps, row_offset, rows)."""
        return self._c.layout(name)

    def health(self):
        """Every ps's health, in task order."""
        return self._c.health()

    def pull(self, name, *, out=None, min_version=0, wait_timeout=0.0, exact_version=False,
             versions=None):
        """The variable's values (an array of its shape), into ``out`` when given.
        min_version: wait (at most wait_timeout seconds) until every shard has reached it.
        versions: a shardps.Versions to fill with what the pull read."""
        return self.pull_many([name], out={name: out}, min_version=min_version,
                              wait_timeout=wait_timeout, exact_version=exact_version,
                              versions=versions)[name]

    def pull_many(self, names, *, out=None, min_version=0, wait_timeout=0.0,
                  exact_version=False, versions=None):
        """Several variables at once: name -> array."""
        return self._c.pull_many(list(names), dict(out or {}), int(min_version),
                                 float(wait_timeout), bool(exact_version), versions)

    def push(self, name, grad, **kwargs):
        """Pushes a gradient of the variable's shape; the ps applies its optimizer."""
        self.push_many({name: grad}, **kwargs)

    def push_many(self, grads, *, step=None, replica=0, idempotency_key=0, generation=0,
                  base_versions=None, job_step=None):
        """Several gradients at once (name -> array). step, replica: a sync step's tag;
        idempotency_key: the same key applies once however often it is sent; generation:
        refused by a ps that rolled back past it; base_versions: what the gradients were
        computed on (from pull's versions=), for the ps' staleness policy; job_step: the
        job's step (lease) they belong to, which a checkpoint cut may hold until every ps
        has snapshotted."""
        self._c.push_many(dict(grads),
                          _push_args(step, replica, idempotency_key, generation, base_versions,
                                     job_step))

    def pull_rows(self, name, ids, *, out=None, **kwargs):
        """Rows by id: an array (len(ids), row width)."""
        return self.pull_rows_many({name: ids}, out={name: out}, **kwargs)[name]

    def pull_rows_many(self, ids, *, out=None, min_version=0, wait_timeout=0.0,
                       exact_version=False, versions=None):
        """Rows of several tables at once (name -> ids), one batched call per ps."""
        ids = {name: _ids(i, f"ids[\"{name}\"]") for name, i in ids.items()}
        return self._c.pull_rows_many(ids, dict(out or {}), int(min_version),
                                      float(wait_timeout), bool(exact_version), versions)

    def push_rows(self, name, ids, grads, **kwargs):
        """Gradients of rows by id (len(ids), row width); duplicate ids are summed."""
        self.push_rows_many({name: ids}, {name: grads}, **kwargs)

    def push_rows_many(self, ids, grads, *, step=None, replica=0, idempotency_key=0,
                       generation=0, base_versions=None, job_step=None):
        """Row gradients of several tables at once (name -> ids, name -> gradients); the
        keywords as push_many's."""
        ids = {name: _ids(i, f"ids[\"{name}\"]") for name, i in ids.items()}
        self._c.push_rows_many(ids, dict(grads),
                               _push_args(step, replica, idempotency_key, generation,
                                          base_versions, job_step))

    def assign(self, name, values):
        """Overwrites the whole variable."""
        self._c.assign(name, values)

"""shardps.torch: PyTorch models whose parameters live on shardps' ps tasks.

Optional: ``import shardps.torch`` needs PyTorch; the rest of shardps needs only numpy.

    import shardps, shardps.torch as spt

    class TwoTower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.users = spt.ShardedEmbedding("users", None, 32)   # dynamic: hashed int64 keys
            self.items = spt.ShardedEmbedding("items", 1682, 32)   # fixed: ids 0..1681
            self.mlp = torch.nn.Linear(64, 1)                       # dense: on the ps too

    model = TwoTower()
    opt = spt.DistributedOptimizer(model)        # checks the job declares what the model has
    with shardps.Worker() as worker:
        for step in worker.steps():
            with step, opt.use(step):             # pulls the dense parameters into the model
                loss = loss_fn(model(users, items), labels)
                loss.backward()
                opt.step()                        # pushes dense and row gradients: one update
                step.done(loss=loss.item(), examples=len(labels))

The optimizer is the ps' (the job file's ``optimizer`` for dense variables and
``embedding_optimizer`` for tables: Adagrad, lazy Adam, FTRL, ...), so no torch optimizer runs
on the worker. ``declare(model)`` gives the job file's ``variables`` for a model, with
initializers in torch's default form (uniform in ±1/sqrt(fan_in) for weights and biases of
Linear and Conv layers, N(0, 1) for embeddings).
"""

import threading

import numpy as np
import torch

from shardps.errors import FailedPrecondition, InvalidArgument

_local = threading.local()


def _scope():
    scope = getattr(_local, "scope", None)
    if scope is None:
        raise FailedPrecondition("a ShardedEmbedding runs inside opt.use(step) (training) or "
                                 "shardps.torch.evaluating(...) (evaluation)")
    return scope


def _host_numpy(tensor):
    """A float32 C-contiguous numpy view of a CPU tensor (a copy only when the tensor lives
    on another device or is not contiguous float32)."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype != torch.float32:
        t = t.float()
    return np.ascontiguousarray(t.numpy())


class ShardedEmbedding(torch.nn.Module):
    """An embedding table on the ps: ``name`` (the job's variable), ``num_embeddings`` rows
    (None: a dynamic table of hashed int64 keys, created row by row as keys appear) of
    ``embedding_dim`` floats. forward(ids) of any shape gives (*ids.shape, dim): the distinct
    ids are pulled (one batched call per ps), and backward sums the gradients of duplicate ids
    into one row each, pushed by the optimizer's step(). ``initializer`` (a job file's
    initializer) is what declare() gives the table; default N(0, 1), as torch.nn.Embedding."""

    def __init__(self, name, num_embeddings, embedding_dim, initializer=None):
        super().__init__()
        if num_embeddings is not None and num_embeddings <= 0:
            raise InvalidArgument(f"ShardedEmbedding {name!r}: num_embeddings must be > 0 or "
                                  f"None (dynamic), got {num_embeddings}")
        if embedding_dim <= 0:
            raise InvalidArgument(f"ShardedEmbedding {name!r}: embedding_dim must be > 0, "
                                  f"got {embedding_dim}")
        self.table = name
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.initializer = initializer or {"type": "random_normal", "mean": 0.0, "stddev": 1.0}

    def declaration(self):
        return {"name": self.table, "shape": [self.num_embeddings, self.embedding_dim],
                "access": "rows", "initializer": self.initializer}

    def _rows(self, ids):
        """(rows of the distinct ids as a tensor, the inverse index) for ids of any shape."""
        if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise InvalidArgument(f"ShardedEmbedding {self.table!r}: ids must be an integer "
                                  f"tensor, got {ids.dtype}")
        flat = ids.detach().reshape(-1).to("cpu", torch.int64).numpy()
        unique, inverse = np.unique(flat, return_inverse=True)
        if self.num_embeddings is not None and len(unique) and (
                unique[0] < 0 or unique[-1] >= self.num_embeddings):
            bad = unique[0] if unique[0] < 0 else unique[-1]
            raise InvalidArgument(f"ShardedEmbedding {self.table!r}: id {bad} is outside "
                                  f"[0, {self.num_embeddings})")
        rows = _scope().rows(self, unique)
        device = ids.device
        return rows.to(device), torch.from_numpy(inverse.reshape(-1)).to(device)

    def forward(self, ids):
        rows, inverse = self._rows(ids)
        # index_select's backward sums the gradients of duplicate ids into their row.
        return rows.index_select(0, inverse).reshape(*ids.shape, self.embedding_dim)


class ShardedEmbeddingBag(ShardedEmbedding):
    """A ShardedEmbedding reducing each bag: forward(ids (batch, bag), per_sample_weights=None)
    gives (batch, dim), the ``mode`` ("sum" or "mean") of each row's embeddings (with
    per_sample_weights: their weighted sum)."""

    def __init__(self, name, num_embeddings, embedding_dim, mode="sum", initializer=None):
        super().__init__(name, num_embeddings, embedding_dim, initializer)
        if mode not in ("sum", "mean"):
            raise InvalidArgument(f"ShardedEmbeddingBag {name!r}: mode must be \"sum\" or "
                                  f"\"mean\", got {mode!r}")
        self.mode = mode

    def forward(self, ids, per_sample_weights=None):
        if ids.dim() != 2:
            raise InvalidArgument(f"ShardedEmbeddingBag {self.table!r}: ids must be 2-D "
                                  f"(batch, bag), got shape {tuple(ids.shape)}")
        vectors = super().forward(ids)  # (batch, bag, dim)
        if per_sample_weights is not None:
            return (vectors * per_sample_weights.unsqueeze(-1)).sum(dim=1)
        return vectors.sum(dim=1) if self.mode == "sum" else vectors.mean(dim=1)


def _tables(model):
    return [m for m in model.modules() if isinstance(m, ShardedEmbedding)]


def _fan_in(shape):
    return int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])


def declare(model):
    """The job file's ``variables`` for `model`: each parameter (by its name in
    model.named_parameters()) and each ShardedEmbedding. Weights and biases get torch's
    default initialization for Linear and Conv layers (uniform in ±1/sqrt(fan_in), fan_in of
    the layer's weight); a parameter torch names otherwise gets the same rule by its shape."""
    variables = []
    weights = {}
    for name, p in model.named_parameters():
        if name.endswith("weight"):
            weights[name[:-len("weight")]] = tuple(p.shape)
    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        if name.endswith("bias") and name[:-len("bias")] in weights:
            fan_in = _fan_in(weights[name[:-len("bias")]])
        else:
            fan_in = _fan_in(shape)
        bound = 1.0 / float(np.sqrt(max(fan_in, 1)))
        variables.append({"name": name, "shape": list(shape),
                          "initializer": {"type": "random_uniform", "minval": -bound,
                                          "maxval": bound}})
    variables += [t.declaration() for t in _tables(model)]
    return variables


def _positions(keys, unique, table, where):
    """The positions of the ids `unique` in the sorted `keys` read for `table`; InvalidArgument
    naming the first id that was not read (`where` says where it should have been)."""
    at = np.searchsorted(keys, unique)
    missing = (at >= len(keys)) | (keys[np.minimum(at, len(keys) - 1)] != unique)
    if missing.any():
        raise InvalidArgument(f"table {table.table!r}: id {unique[missing][0]} was not {where}")
    return at


class _TrainScope:
    """A step's rows: pulled through the step (or prefetched by use(step, ids=...)), their
    gradients kept for the push."""

    def __init__(self, step, prefetched=None):
        self.step = step
        self.pulled = []  # (table name, unique ids, rows tensor): lookups pulled on their own
        # table name -> (sorted distinct ids, rows tensor): read together before the forward
        self.prefetched = prefetched or {}

    def rows(self, table, unique):
        if table.table in self.prefetched:
            keys, rows = self.prefetched[table.table]
            at = _positions(keys, unique, table, "in use(step, ids=...)'s ids")
            return rows.index_select(0, torch.from_numpy(at))
        values = self.step.pull_rows({table.table: unique})[table.table]
        rows = torch.from_numpy(values)
        rows.requires_grad_(torch.is_grad_enabled())
        self.pulled.append((table.table, unique, rows))
        return rows

    def row_grads(self):
        """table name -> (ids, gradients) over every lookup of the step (a table looked up
        twice pushes both lookups' rows; the client sums duplicate ids)."""
        out = {}
        lookups = self.pulled + [(n, k, r) for n, (k, r) in self.prefetched.items()]
        for name, unique, rows in lookups:
            if rows.grad is None:
                continue
            ids, grads = out.get(name, ([], []))
            ids.append(unique)
            grads.append(_host_numpy(rows.grad))
            out[name] = (ids, grads)
        return {name: (np.concatenate(i), np.concatenate(g)) for name, (i, g) in out.items()}


class _EvalScope:
    """Rows read once, consistently with the dense parameters, looked up from memory."""

    def __init__(self, tables):
        self.tables = tables  # name -> (sorted ids, rows array)

    def rows(self, table, unique):
        if table.table not in self.tables:
            raise InvalidArgument(f"table {table.table!r} was not read for this evaluation: "
                                  f"name its ids in evaluating(..., ids={{...}})")
        keys, values = self.tables[table.table]
        at = _positions(keys, unique, table, "read for this evaluation")
        return torch.from_numpy(values[at])


class _Use:
    def __init__(self, scope, on_exit=None):
        self.scope = scope
        self.on_exit = on_exit

    def __enter__(self):
        if getattr(_local, "scope", None) is not None:
            raise FailedPrecondition("a shardps.torch scope is already open on this thread")
        _local.scope = self.scope
        return self.scope

    def __exit__(self, *exc):
        _local.scope = None
        if self.on_exit is not None:
            self.on_exit()
        return False


def _check_declared(model, job, dense, tables):
    """InvalidArgument naming a parameter or table the job lacks or declares otherwise."""
    for name, p in dense:
        v = job.variables.get(name)
        if v is None:
            raise InvalidArgument(f"the model's parameter {name!r} is not a variable of job "
                                  f"{job.name!r} (shardps.torch.declare(model) gives them)")
        if v.rows or tuple(v.shape) != tuple(p.shape):
            raise InvalidArgument(f"the model's parameter {name!r} is {tuple(p.shape)}; job "
                                  f"{job.name!r} declares {tuple(v.shape)}"
                                  f"{' read by rows' if v.rows else ''}")
    for t in tables:
        v = job.variables.get(t.table)
        if v is None or not v.rows:
            raise InvalidArgument(f"ShardedEmbedding {t.table!r} is not a table (access "
                                  f"\"rows\") of job {job.name!r}")
        if v.dynamic != (t.num_embeddings is None) or v.row_width != t.embedding_dim or (
                not v.dynamic and v.shape[0] != t.num_embeddings):
            raise InvalidArgument(f"ShardedEmbedding {t.table!r} is "
                                  f"[{t.num_embeddings}, {t.embedding_dim}]; job {job.name!r} "
                                  f"declares {list(v.shape)}{' (dynamic)' if v.dynamic else ''}")


class DistributedOptimizer:
    """The ps' optimizer for `model`: each step, ``use(step)`` pulls the model's dense
    parameters (at the step's version) into the parameters themselves and clears their
    gradients; ``step()`` pushes every dense gradient and every ShardedEmbedding's row
    gradients, tagged with the step (the ps applies the job's optimizers, exactly once).
    Parameters on a CUDA device are copied through the host."""

    def __init__(self, model):
        self.model = model
        self.dense = list(model.named_parameters())
        self.tables = _tables(model)
        self._checked_job = None
        self._scope = None

    def use(self, step, ids=None):
        """A context for one step: pulls the dense parameters into the model and opens the
        step's row scope. ``ids`` (table name -> every id the step will look up there) reads
        those tables' rows in one batched call, beside the dense pull, instead of one call per
        lookup: a model with several tables should name them."""
        if self._checked_job is not step.job:
            _check_declared(self.model, step.job, self.dense, self.tables)
            self._checked_job = step.job
        for _, p in self.dense:
            p.grad = None
        prefetch = {}
        for name, i in (ids or {}).items():
            if name not in {t.table for t in self.tables}:
                raise InvalidArgument(f"ids[{name!r}]: the model has no ShardedEmbedding "
                                      f"{name!r}")
            flat = i.detach().reshape(-1).cpu().numpy() if torch.is_tensor(i) else np.asarray(i)
            prefetch[name] = np.unique(flat.astype(np.int64).reshape(-1))
        pulled = {}
        if prefetch:
            pulled = _in_parallel(lambda: step.pull_rows(prefetch),
                                  lambda: self.dense and load_dense(
                                      self.dense, step.pull, [n for n, _ in self.dense]))
        elif self.dense:
            load_dense(self.dense, step.pull, [n for n, _ in self.dense])
        prefetched = {}
        for name, keys in prefetch.items():
            rows = torch.from_numpy(pulled[name])
            rows.requires_grad_(torch.is_grad_enabled())
            prefetched[name] = (keys, rows)
        self._scope = _TrainScope(step, prefetched)

        def closed():
            self._scope = None
        return _Use(self._scope, closed)

    def step(self):
        """Pushes the step's gradients: every dense parameter's (zeros for one without a
        gradient, as a sync step needs each) and every looked-up table's rows."""
        if self._scope is None:
            raise FailedPrecondition("opt.step() runs inside opt.use(step)")
        grads = {}
        for name, p in self.dense:
            grads[name] = (_host_numpy(p.grad) if p.grad is not None
                           else np.zeros(tuple(p.shape), np.float32))
        self._scope.step.push(grads, rows=self._scope.row_grads())


def _in_parallel(first, second):
    """Runs second() on another thread while first() runs here (each releases the GIL while
    it waits on the network); returns first()'s result, raises either's exception."""
    box = {}

    def run():
        try:
            second()
        except BaseException as e:  # re-raised below, on the caller's thread
            box["error"] = e
    thread = threading.Thread(target=run)
    thread.start()
    try:
        result = first()
    finally:
        thread.join()
    if "error" in box:
        raise box["error"]
    return result


def load_dense(named, pull, names):
    """Pulls `names` with `pull` (a Step's or an EvalState's) into the parameters `named`
    ((name, parameter) pairs): in place, without a copy, for contiguous float32 CPU
    parameters; through the host otherwise."""
    targets = {}
    staged = {}
    for name, p in named:
        if p.device.type == "cpu" and p.dtype == torch.float32 and p.is_contiguous():
            targets[name] = p.detach().numpy()
        else:
            staged[name] = p
    values = pull(names, out=targets) if targets else pull(names)
    with torch.no_grad():
        for name, p in staged.items():
            p.copy_(torch.from_numpy(values[name]).to(p.device, p.dtype))


def evaluating(state, model, ids=None):
    """A context in which `model` computes with one consistent state of the ps: its dense
    parameters and, for each ShardedEmbedding, the rows of ``ids[table name]`` (all the ids
    the evaluation will look up), pulled at one version with the EvalState `state`."""
    dense = list(model.named_parameters())
    tables = {t.table: t for t in _tables(model)}
    ids = {name: np.unique(np.asarray(i, dtype=np.int64).reshape(-1))
           for name, i in (ids or {}).items()}
    for name in ids:
        if name not in tables:
            raise InvalidArgument(f"ids[{name!r}]: the model has no ShardedEmbedding {name!r}")
    values = state.pull([n for n, _ in dense], rows=ids)
    with torch.no_grad():
        for name, p in dense:
            p.copy_(torch.from_numpy(values[name]).to(p.device, p.dtype))
    return _Use(_EvalScope({name: (ids[name], values[name]) for name in ids}))

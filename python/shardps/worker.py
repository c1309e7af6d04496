"""shardps.Worker: a worker task whose steps your Python code computes.

A job of model "external" (a job file's ``"model": "external"``, which declares its
variables: docs/jobs.md) is run by the chief as any other: it creates the variables, leases
steps (sync, async or stale), re-leases the steps of a worker that failed, checkpoints and
rolls back. Each step it leases to this worker is handed to your code:

    import shardps

    with shardps.Worker() as worker:            # this process is TF_CONFIG's worker task
        for step in worker.steps():            # until the job ends
            with step:                          # an exception fails this step only
                x, y = features[step.indices], labels[step.indices]
                w = step.pull()                 # every dense variable, by its short name
                loss, grads = model(w, x, y)
                step.push(grads)                # tagged for the step: exactly once
                step.done(loss=loss, examples=len(x))

Pulls in a step read at least the step's version (exactly it in sync mode) and pushes carry
its sync tag, idempotency key and recovery generation, so a step re-leased after a failure
is applied once and the chief cannot tell which language computed it.
"""

import json
import os
import signal
import threading
import time

import numpy as np

from shardps import _core
from shardps._units import Unit, each, metrics_port_from
from shardps.client import Client
from shardps.errors import Error, FailedPrecondition, InvalidArgument

# A pull that waits for the step's version gives up after this long (the C++ worker's
# --pull_wait_timeout default).
PULL_WAIT_TIMEOUT_S = 30.0


class Variable:
    """A variable the job declares: ``name`` (within the job), ``shape``, ``rows`` (read by
    rows), ``dynamic`` (keyed by hashed int64 ids), ``full_name`` (on the ps)."""

    def __init__(self, job_name, spec):
        self.name = spec["name"]
        self.full_name = f"{job_name}/{self.name}"
        self.dynamic = spec["shape"][0] is None
        self.shape = tuple(0 if d is None else d for d in spec["shape"])
        self.rows = spec.get("access") == "rows"

    @property
    def row_width(self):
        return int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1

    def __repr__(self):
        return f"Variable({self.name!r}, {self.shape}, rows={self.rows})"


class Job:
    """The job being run: its job file as a dict (``spec``), and ``name``, ``batch_size``,
    ``examples_per_epoch``, ``mode``, ``seed``, ``variables`` (name -> Variable)."""

    def __init__(self, job_json):
        self.spec = json.loads(job_json)
        self.name = self.spec["name"]
        self.batch_size = self.spec["batch_size"]
        self.examples_per_epoch = self.spec["examples_per_epoch"]
        self.mode = self.spec["mode"]
        self.seed = self.spec["seed"]
        self.variables = {v["name"]: Variable(self.name, v) for v in self.spec["variables"]}

    def dense(self):
        return [v for v in self.variables.values() if not v.rows]

    def tables(self):
        return [v for v in self.variables.values() if v.rows]


class Step(Unit):
    """One step the chief leased to this worker: ``step_id``, ``epoch``, ``batch_index``,
    ``replica``, ``sync``, ``min_version``, ``generation``, ``job`` (Job), ``indices`` (the
    example indices of its batch: the same on every worker for the same epoch and batch).
    ``with step:`` fails the step on an exception (re-leased; the loop goes on)."""

    _unfinished = "the step's code returned without step.done()"

    def __init__(self, core, job, client):
        self._core = core
        self.job = job
        self._client = client
        self.step_id = core.step_id
        self.epoch = core.epoch
        self.batch_index = core.batch_index
        self.replica = core.replica
        self.sync = core.sync
        self.min_version = core.min_version
        self.generation = core.generation
        self._versions = _core.Versions()
        self._pull_ms = 0.0
        self._push_ms = 0.0
        self._pulled_at = None
        self._compute_ms = 0.0
        self._indices = None

    @property
    def indices(self):
        if self._indices is None:
            self._indices = self._core.indices()
        return self._indices

    def _variable(self, name, rows):
        v = self.job.variables.get(name)
        if v is None:
            raise InvalidArgument(f"job {self.job.name!r} declares no variable {name!r} "
                                  f"(it declares {', '.join(self.job.variables)})")
        if v.rows != rows:
            how = "by rows (pull_rows, push rows=)" if v.rows else "whole (pull, push)"
            raise InvalidArgument(f"variable {name!r} is read {how}")
        return v

    def _check_open(self, what):
        if self._core.finished:
            why = self._core.error or "it was reported done"
            raise FailedPrecondition(f"step {self.step_id} has ended ({why}): no {what} after "
                                     f"its end (a worker updates the ps only within a step)")

    def pull(self, names=None, *, out=None):
        """The step's dense variables (default: all), name -> array, at least the step's
        version (in sync mode exactly it)."""
        self._check_open("pull")
        names = [v.name for v in self.job.dense()] if names is None else list(names)
        full = {self._variable(n, rows=False).full_name: n for n in names}
        outs = {self.job.variables[n].full_name: a for n, a in (out or {}).items()}
        start = time.monotonic()
        values = self._client.pull_many(list(full), out=outs, min_version=self.min_version,
                                        wait_timeout=PULL_WAIT_TIMEOUT_S,
                                        exact_version=self.sync, versions=self._versions)
        self._pull_ms += (time.monotonic() - start) * 1e3
        self._pulled_at = time.monotonic()
        return {full[k]: v for k, v in values.items()}

    def pull_rows(self, ids, *, out=None):
        """Rows of the step's tables (name -> ids), name -> array (len(ids), width)."""
        self._check_open("pull")
        full = {}
        for name, i in ids.items():
            full[self._variable(name, rows=True).full_name] = i
        outs = {self.job.variables[n].full_name: a for n, a in (out or {}).items()}
        start = time.monotonic()
        versions = _core.Versions()
        values = self._client.pull_rows_many(full, out=outs, min_version=self.min_version,
                                             wait_timeout=PULL_WAIT_TIMEOUT_S,
                                             exact_version=self.sync, versions=versions)
        self._pull_ms += (time.monotonic() - start) * 1e3
        self._pulled_at = time.monotonic()
        short = {v.full_name: v.name for v in self.job.variables.values()}
        return {short[k]: v for k, v in values.items()}

    def push(self, grads=None, *, rows=None):
        """The step's gradients: ``grads`` name -> array for dense variables, ``rows`` name ->
        (ids, gradients) for tables. In sync mode every dense variable needs its gradient
        and a table without rows pushes none (the ps counts every replica's push). Refused
        (FailedPrecondition) once the step has ended."""
        self._check_open("push")
        grads = dict(grads or {})
        rows = dict(rows or {})
        if self._pulled_at is not None:
            self._compute_ms = (time.monotonic() - self._pulled_at) * 1e3
        dense = {self._variable(n, rows=False).full_name: g for n, g in grads.items()}
        tables = {self._variable(n, rows=True).full_name: r for n, r in rows.items()}
        if self.sync:
            missing = [v.name for v in self.job.dense() if v.full_name not in dense]
            if missing:
                raise InvalidArgument(f"sync step {self.step_id}: push needs a gradient for "
                                      f"every dense variable; missing {', '.join(missing)}")
            for v in self.job.tables():
                tables.setdefault(v.full_name, (np.zeros(0, np.int64),
                                                np.zeros((0, v.row_width), np.float32)))
        tags = dict(idempotency_key=self._core.idempotency_key, generation=self.generation,
                    step=self._core.sync_step if self.sync else None, replica=self.replica,
                    base_versions=self._versions, job_step=self.step_id)
        start = time.monotonic()

        def push_rows():
            self._client.push_rows_many({k: r[0] for k, r in tables.items()},
                                        {k: r[1] for k, r in tables.items()}, **tags)
        if dense and tables:  # both at once: each call releases the GIL while it waits
            errors = []

            def run():
                try:
                    push_rows()
                except BaseException as e:
                    errors.append(e)
            thread = threading.Thread(target=run)
            thread.start()
            try:
                self._client.push_many(dense, **tags)
            finally:
                thread.join()
            if errors:
                raise errors[0]
        elif dense:
            self._client.push_many(dense, **tags)
        elif tables:
            push_rows()
        self._push_ms += (time.monotonic() - start) * 1e3

    def done(self, loss=0.0, correct=0, examples=None):
        """Reports the step done (its loss and metrics go to the chief's status). Returns
        False when the step had already ended (the worker stopped, or the chief gave up on
        it), True otherwise."""
        examples = len(self.indices) if examples is None else examples
        return self._core.succeed(float(loss), int(correct), int(examples),
                                  int(self._versions.min_version), self._pull_ms,
                                  self._compute_ms, self._push_ms)

    def fail(self, exception):
        """Fails the step with ``exception``: a shardps.Error keeps its code and typed detail
        (a ps that is down, a rollback), so the chief acts on it; anything else counts as an
        error of the step (re-leased up to the job's attempt limit)."""
        if isinstance(exception, Error):
            return self._core.fail(exception.code, exception.kind, exception.message,
                                   exception.ps_task, exception.generation)
        return self._core.fail("INTERNAL", "UNSPECIFIED",
                               f"{type(exception).__name__}: {exception}", None, None)



class Worker:
    """This process as TF_CONFIG's worker task (tf_config: the JSON or a file path; default
    $TF_CONFIG): serves the chief at the task's address until closed."""

    def __init__(self, tf_config=None, *, rpc_timeout=60.0, metrics_port=None,
                 leave_on_sigterm=True, orphan_timeout=None):
        """metrics_port (default $SHARDPS_METRICS_PORT, 0: off): serve Prometheus metrics at
        http(s)://<task host>:<port>/metrics as the worker daemon does (steps, examples,
        pull / compute / push seconds, loss), with the process's TLS.

        The worker announces itself to the chief, so a worker the chief's TF_CONFIG does not
        name joins the running job (docs/elastic.md); a refusal (its index is live elsewhere,
        another job's ps, the job ended) is raised by the next next_step(). With
        leave_on_sigterm (and no SIGTERM handler of your own), SIGTERM makes it leave the job
        as the worker daemon does: the step in progress finishes, the chief takes back the
        rest, and steps() ends, so the script exits 0.

        orphan_timeout (seconds; default $SHARDPS_ORPHAN_TIMEOUT_S, else 3600; 0: never): with
        no call from the chief for this long the job is gone (the chief exited for good):
        steps() ends and stop_reason says so, as the worker daemon exits "orphaned"."""
        if orphan_timeout is None:
            text = os.environ.get("SHARDPS_ORPHAN_TIMEOUT_S", "3600")
            try:
                orphan_timeout = float(text)
            except ValueError:
                raise InvalidArgument(f"SHARDPS_ORPHAN_TIMEOUT_S={text!r}: not a number of "
                                      "seconds") from None
        if not orphan_timeout >= 0:
            raise InvalidArgument(f"orphan_timeout must be >= 0 (0: never), got {orphan_timeout}")
        self._w = _core._Worker(tf_config or "", float(rpc_timeout),
                                metrics_port_from(metrics_port), float(orphan_timeout))
        self._client = None
        self._job_json = None
        self.job = None
        self._previous_sigterm = None
        if (leave_on_sigterm and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)):
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum, frame):
        # The handler runs on the main thread, maybe inside a step: leave from another
        # thread, so that the step finishes while the chief waits for it.
        threading.Thread(target=self._leave_quietly, daemon=True).start()

    def _leave_quietly(self):
        try:
            self.leave()
        except Error as e:
            import sys
            print(f"shardps.Worker: could not leave the job: {e}", file=sys.stderr)

    def leave(self, wait=20.0):
        """Leaves the job: the chief leases this worker no more steps and answers once the
        steps it holds came back (up to `wait` seconds; then it hands them to other workers).
        steps() ends. Returns how many leased steps the chief took back."""
        return self._w.leave(float(wait))

    @property
    def address(self):
        return self._w.address

    @property
    def metrics_url(self):
        """Where Prometheus scrapes this worker ("" without a metrics port)."""
        return self._w.metrics_url

    @property
    def task_index(self):
        return self._w.task_index

    def next_step(self, timeout=None):
        """The next step the chief leases, or None once the job has ended (timeout: seconds
        to wait, None for as long as it takes)."""
        core = self._w.next(-1.0 if timeout is None else float(timeout))
        if core is None:
            return None
        job_json = core.job_json
        if job_json != self._job_json:
            self._job_json = job_json
            self.job = Job(job_json)
            self._client = Client._wrap(core.client())
        return Step(core, self.job, self._client)

    def steps(self):
        """Each step the chief leases, until the job ends. A step the loop body leaves
        unfinished is failed (re-leased) when the next one is asked for."""
        return each(self.next_step, "the loop moved on without step.done()")

    def run(self, step_fn):
        """Calls step_fn(step) for every step until the job ends; an exception fails that
        step (the chief re-leases it) and the loop goes on. step_fn may return the step's
        loss, or (loss, correct), or call step.done itself."""
        for step in self.steps():
            with step:
                result = step_fn(step)
                if not step.finished:
                    loss, correct = (result if isinstance(result, tuple)
                                     else (result or 0.0, 0))
                    step.done(loss=loss, correct=correct)

    @property
    def stopped(self):
        return self._w.stopped

    @property
    def stop_reason(self):
        """Why steps() ended ("" while it runs): the chief's shutdown, a leave, the worker
        closed, or orphaned."""
        return self._w.stop_reason

    def close(self):
        if (self._previous_sigterm is not None
                and threading.current_thread() is threading.main_thread()):
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

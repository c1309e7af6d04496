"""shardps.Evaluator: the evaluator task of a job whose model your Python code computes.

It follows the chief's job as the evaluator daemon does: while the job trains it asks your
code to evaluate the live parameters (every ``eval_every_steps`` steps of the job file, or as
often as your code keeps up), waits while the job is paused or rolling back, and once
training is done asks for the final model, whose metrics the chief waits for before it ends
the job (the launcher's ``final test accuracy`` line). Each evaluation reads one consistent
state: every shard of every variable it pulls at the same version.

    import shardps

    with shardps.Evaluator() as evaluator:     # this process is TF_CONFIG's evaluator task
        for state in evaluator.states():       # until the job ends
            with state:                         # an exception fails this evaluation only
                w = state.pull()                # every dense variable, by its short name
                accuracy, loss = evaluate(w, test_x, test_y)
                state.report(accuracy=accuracy, loss=loss, examples=len(test_x))

Metrics go to the chief (``shardctl status``, the launcher) and, like the evaluator daemon's,
with ``metrics_file`` (default $SHARDPS_METRICS_FILE) to a JSON-lines file, with
``metrics_port`` (default $SHARDPS_METRICS_PORT, 0: off) to Prometheus at
``http(s)://<task host>:<port>/metrics`` (shardps_evaluator_accuracy, _loss, _auc, ...), and
with ``tensorboard_dir`` (default $SHARDPS_TENSORBOARD_DIR) to TensorBoard event files
(eval/accuracy, eval/loss, eval/auc by step).
"""

import json
import os

import numpy as np

from shardps import _core
from shardps._units import Unit, each, metrics_port_from
from shardps.errors import InvalidArgument
from shardps.worker import Job


def task(tf_config=None):
    """(type, index) of this process's task in TF_CONFIG (the JSON, a file path, or None for
    $TF_CONFIG), e.g. ("worker", 1): a script that runs as a worker and as the evaluator
    picks its part with it."""
    text = tf_config if tf_config is not None else os.environ.get("TF_CONFIG", "")
    if text and not text.lstrip().startswith("{"):
        with open(text) as f:
            text = f.read()
    if not text:
        raise InvalidArgument("TF_CONFIG is not set (and no tf_config was given)")
    try:
        spec = json.loads(text).get("task", {})
        return str(spec["type"]), int(spec.get("index", 0))
    except (ValueError, KeyError, AttributeError, TypeError) as e:
        raise InvalidArgument(f"TF_CONFIG: task: {e}") from None


class EvalState(Unit):
    """One evaluation the job asks for: ``job`` (Job), ``job_id``, ``final`` (the model after
    training), ``steps_done`` and ``elapsed_s`` (the job's, when it was asked); after a pull,
    ``version`` (the parameters' version) and ``consistent``. ``with state:`` fails the
    evaluation on an exception (the follower asks again)."""

    _unfinished = "the evaluation returned without state.report()"

    def __init__(self, core):
        self._core = core
        self.job = Job(core.job_json)
        self.job_id = core.job_id
        self.final = core.final
        self.steps_done = core.steps_done
        self.elapsed_s = core.elapsed_s
        self.version = None
        self.consistent = None

    def pull(self, names=None, *, rows=None):
        """Dense variables (default: all the job declares) and ``rows`` (table name -> ids),
        name -> array, all at one version where the ps allow it (retried while updates land
        between shards)."""
        names = [v.name for v in self.job.dense()] if names is None else list(names)
        rows = dict(rows or {})
        dense_full = []
        for n in names:
            v = self._variable(n)
            if v.rows:
                raise InvalidArgument(f"variable {n!r} is read by rows: pull(rows={{{n!r}: ids}})")
            dense_full.append(v.full_name)
        row_full = {}
        for n, ids in rows.items():
            v = self._variable(n)
            if not v.rows:
                raise InvalidArgument(f"variable {n!r} is read whole: pull([{n!r}])")
            row_full[v.full_name] = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        values, low, high, consistent = self._core.pull(dense_full, row_full)
        self.version = low
        self.consistent = consistent
        short = {v.full_name: v.name for v in self.job.variables.values()}
        return {short[k]: a for k, a in values.items()}

    def _variable(self, name):
        v = self.job.variables.get(name)
        if v is None:
            raise InvalidArgument(f"job {self.job.name!r} declares no variable {name!r} "
                                  f"(it declares {', '.join(self.job.variables)})")
        return v

    def report(self, *, accuracy, loss=0.0, examples=0, auc=0.0):
        """The metrics of the state pulled last. Returns False when the evaluation had ended
        already (the evaluator stopped)."""
        return self._core.report(float(loss), float(accuracy), int(examples), float(auc))

    def fail(self, exception):
        return self._core.fail(f"{type(exception).__name__}: {exception}")



class Evaluator:
    """This process as TF_CONFIG's evaluator task (tf_config: the JSON or a file path;
    default $TF_CONFIG), following the chief's job until it ends or this is closed."""

    def __init__(self, tf_config=None, *, rpc_timeout=60.0, metrics_file=None,
                 metrics_port=None, tensorboard_dir=None):
        if metrics_file is None:
            metrics_file = os.environ.get("SHARDPS_METRICS_FILE", "")
        if tensorboard_dir is None:
            tensorboard_dir = os.environ.get("SHARDPS_TENSORBOARD_DIR", "")
        self._e = _core._Evaluator(tf_config or "", float(rpc_timeout), metrics_file,
                                   metrics_port_from(metrics_port), tensorboard_dir)

    @property
    def metrics_url(self):
        """Where Prometheus scrapes this evaluator ("" without a metrics port)."""
        return self._e.metrics_url

    def next_state(self, timeout=None):
        """The next evaluation, or None once the job has ended (timeout: seconds to wait,
        None for as long as it takes)."""
        core = self._e.next(-1.0 if timeout is None else float(timeout))
        return None if core is None else EvalState(core)

    def states(self):
        """Each evaluation the job asks for, until it ends. One the loop body leaves
        unreported is failed (asked again) when the next one is asked for."""
        return each(self.next_state, "the loop moved on without state.report()")

    def run(self, evaluate_fn):
        """Calls evaluate_fn(state) for every evaluation until the job ends: it pulls what it
        needs and returns a dict of report()'s arguments (accuracy, loss, examples, auc), or
        reports itself. An exception fails that evaluation (retried) and the loop goes on."""
        for state in self.states():
            with state:
                result = evaluate_fn(state)
                if not state.finished:
                    state.report(**result)

    @property
    def outcome(self):
        """"running" until the job ends, then "succeeded" (the final model evaluated),
        "job_failed" (it failed or was cancelled) or "stopped" (closed)."""
        return self._e.outcome

    def close(self):
        self._e.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""shardps: train your own model on shardps' parameter servers.

The core needs only numpy: ``shardps.Client`` reads and updates the parameters on the ps
tasks (python/shardps/client.py); ``shardps.Worker`` runs the steps of a job whose model
your code computes (python/shardps/worker.py); ``shardps.Evaluator`` evaluates it while it
trains and reports to the chief (python/shardps/evaluator.py). ``shardps.torch`` (optional,
needs PyTorch) keeps a torch model's parameters and embedding tables on the ps. Errors are
``shardps.Error`` subclasses (python/shardps/errors.py). The guide: docs/python.md.
"""

from shardps.errors import *  # noqa: F401,F403  (the exception classes)
from shardps.errors import Error
from shardps.client import Client, Variable, Versions, ps_addresses
from shardps.datasets import batch_indices
from shardps.evaluator import EvalState, Evaluator, task
from shardps.worker import Job, Step, Worker

__version__ = "0.1.0"

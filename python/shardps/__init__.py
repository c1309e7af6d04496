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


def use_tls(ca_file, cert_file="", key_file="", *, client_auth=False, refresh_s=60):
    """TLS for every connection this process makes from now on (and the servers a Worker or
    Evaluator starts): servers' certificates are checked against ``ca_file``;
    ``cert_file``/``key_file`` are this process's own (mutual TLS). The files are read again
    every ``refresh_s`` seconds, so a rotated certificate is used without a restart. The
    environment's SHARDPS_TLS_CA_FILE, SHARDPS_TLS_CERT_FILE and SHARDPS_TLS_KEY_FILE do the
    same at import. Raises InvalidArgument naming what is wrong (docs/security.md)."""
    from shardps import _core
    _core._set_tls(str(cert_file), str(key_file), str(ca_file), bool(client_auth),
                   int(refresh_s))


def _tls_from_environment():
    import os
    ca = os.environ.get("SHARDPS_TLS_CA_FILE", "")
    cert = os.environ.get("SHARDPS_TLS_CERT_FILE", "")
    if ca or cert:
        use_tls(ca, cert, os.environ.get("SHARDPS_TLS_KEY_FILE", ""),
                client_auth=os.environ.get("SHARDPS_TLS_CLIENT_AUTH", "").lower()
                in ("1", "true", "yes"),
                refresh_s=int(os.environ.get("SHARDPS_TLS_REFRESH_S", "60") or 60))


_tls_from_environment()

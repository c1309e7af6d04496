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


def use_tls(ca_file, cert_file="", key_file="", *, client_auth=False, refresh_s=60,
            token_file="", tokens_file="", insecure=False):
    """TLS for every connection this process makes from now on (and the servers a Worker or
    Evaluator starts): servers' certificates are checked against ``ca_file``;
    ``cert_file``/``key_file`` are this process's own (mutual TLS). The files are read again
    every ``refresh_s`` seconds, so a rotated certificate is used without a restart.
    ``token_file`` holds a bearer token sent on every call (its role, docs/security.md);
    ``tokens_file`` is the token -> role table of the servers a Worker starts; ``insecure``
    lets those servers listen beyond loopback without TLS. The environment's SHARDPS_TLS_*,
    SHARDPS_AUTH_TOKEN_FILE, SHARDPS_AUTH_TOKENS_FILE and SHARDPS_INSECURE do the same at
    import. Raises InvalidArgument naming what is wrong."""
    from shardps import _core
    _core._set_tls(str(cert_file), str(key_file), str(ca_file), bool(client_auth),
                   int(refresh_s), str(token_file), str(tokens_file), bool(insecure))


def _tls_from_environment():
    import os
    ca = os.environ.get("SHARDPS_TLS_CA_FILE", "")
    cert = os.environ.get("SHARDPS_TLS_CERT_FILE", "")
    yes = ("1", "true", "yes")
    insecure = os.environ.get("SHARDPS_INSECURE", "").lower() in yes
    token = os.environ.get("SHARDPS_AUTH_TOKEN_FILE", "")
    tokens = os.environ.get("SHARDPS_AUTH_TOKENS_FILE", "")
    if ca or cert or insecure or token or tokens:
        use_tls(ca, cert, os.environ.get("SHARDPS_TLS_KEY_FILE", ""),
                client_auth=os.environ.get("SHARDPS_TLS_CLIENT_AUTH", "").lower() in yes,
                refresh_s=int(os.environ.get("SHARDPS_TLS_REFRESH_S", "60") or 60),
                token_file=token, tokens_file=tokens, insecure=insecure)


_tls_from_environment()

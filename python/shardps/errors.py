"""shardps' exceptions: one class per typed error detail, one per status code.

Every error a shardps call raises is a ``shardps.Error``. Its class says what happened, the
way the C++ side decides by status code and typed detail (common/error_detail.h):

* by detail (the more specific, checked first): ``PsUnavailable`` (a ps could not be reached
  after the client's retries), ``PsStateLost`` (a ps restarted and lost its shards: the job
  rolls back), ``StaleGeneration`` and ``StaleStep`` (an update from before a rollback, or of
  a sync step already applied), ``UnknownJob``, ``CheckpointCorrupt``, ``LimitExceeded``,
  ``ProtocolMismatch``;
* by status code: ``InvalidArgument`` (also a ``ValueError``; ``OutOfRange`` is one),
  ``NotFound`` (a ``LookupError``), ``AlreadyExists``, ``FailedPrecondition``, ``Aborted``,
  ``DeadlineExceeded`` (a ``TimeoutError``), ``Unavailable`` (a ``ConnectionError``),
  ``ResourceExhausted``, ``Cancelled``, ``PermissionDenied``, ``Unauthenticated``,
  ``Unimplemented``, ``Internal``, ``DataLoss``, ``Unknown``.

Attributes: ``code`` (the status code's name, "UNAVAILABLE"), ``kind`` (the detail's kind,
"PS_UNAVAILABLE", or "UNSPECIFIED"), and where the kind has them ``ps_task``, ``generation``,
``file``, ``limit`` (else None).
"""

__all__ = [
    "Error", "InvalidArgument", "OutOfRange", "NotFound", "AlreadyExists", "FailedPrecondition",
    "Aborted", "DeadlineExceeded", "Unavailable", "ResourceExhausted", "Cancelled",
    "PermissionDenied", "Unauthenticated", "Unimplemented", "Internal", "DataLoss", "Unknown",
    "PsUnavailable", "PsStateLost", "StaleGeneration", "StaleStep", "UnknownJob",
    "CheckpointCorrupt", "LimitExceeded", "ProtocolMismatch",
]


class Error(Exception):
    """A shardps call failed; the message names what (the ps, the variable, the argument)."""

    code = "UNKNOWN"
    kind = "UNSPECIFIED"

    def __init__(self, message, code=None, kind=None, ps_task=None, generation=None,
                 file=None, limit=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if kind is not None:
            self.kind = kind
        self.ps_task = ps_task
        self.generation = generation
        self.file = file
        self.limit = limit

    def __str__(self):
        return self.message


class InvalidArgument(Error, ValueError):
    code = "INVALID_ARGUMENT"


class OutOfRange(InvalidArgument):
    code = "OUT_OF_RANGE"


class NotFound(Error, LookupError):
    code = "NOT_FOUND"


class AlreadyExists(Error):
    code = "ALREADY_EXISTS"


class FailedPrecondition(Error):
    code = "FAILED_PRECONDITION"


class Aborted(Error):
    code = "ABORTED"


class DeadlineExceeded(Error, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class Unavailable(Error, ConnectionError):
    code = "UNAVAILABLE"


class ResourceExhausted(Error):
    code = "RESOURCE_EXHAUSTED"


class Cancelled(Error):
    code = "CANCELLED"


class PermissionDenied(Error, PermissionError):
    code = "PERMISSION_DENIED"


class Unauthenticated(Error):
    code = "UNAUTHENTICATED"


class Unimplemented(Error, NotImplementedError):
    code = "UNIMPLEMENTED"


class Internal(Error):
    code = "INTERNAL"


class DataLoss(Error):
    code = "DATA_LOSS"


class Unknown(Error):
    code = "UNKNOWN"


class PsUnavailable(Unavailable):
    """A ps task could not be reached (UNAVAILABLE, or DEADLINE_EXCEEDED on the call to it)."""

    kind = "PS_UNAVAILABLE"


class PsStateLost(Error):
    """A ps task restarted and no longer holds the shards the layout places there."""

    kind = "PS_STATE_LOST"


class StaleGeneration(Aborted):
    """An update from a recovery generation the ps has left (``generation``: the ps's)."""

    kind = "STALE_GENERATION"


class StaleStep(Aborted):
    """A sync push for a step the shard has already applied."""

    kind = "STALE_STEP"


class UnknownJob(FailedPrecondition):
    kind = "UNKNOWN_JOB"


class CheckpointCorrupt(DataLoss):
    kind = "CHECKPOINT_CORRUPT"


class LimitExceeded(ResourceExhausted):
    """A limit was hit; ``limit`` names the flag or field that sets it."""

    kind = "LIMIT"


class ProtocolMismatch(FailedPrecondition):
    kind = "PROTOCOL_MISMATCH"


_BY_KIND = {c.kind: c for c in (PsUnavailable, PsStateLost, StaleGeneration, StaleStep,
                                UnknownJob, CheckpointCorrupt, LimitExceeded, ProtocolMismatch)}
_BY_CODE = {c.code: c for c in (InvalidArgument, OutOfRange, NotFound, AlreadyExists,
                                FailedPrecondition, Aborted, DeadlineExceeded, Unavailable,
                                ResourceExhausted, Cancelled, PermissionDenied,
                                Unauthenticated, Unimplemented, Internal, DataLoss, Unknown)}


def from_status(message, info):
    """The exception for a failed status: ``info`` has "code" and "kind" and the detail's
    fields (the extension calls this)."""
    code = info.get("code", "UNKNOWN")
    kind = info.get("kind", "UNSPECIFIED")
    cls = _BY_KIND.get(kind) or _BY_CODE.get(code) or Unknown
    return cls(message, code=code, kind=kind, ps_task=info.get("ps_task"),
               generation=info.get("generation"), file=info.get("file"),
               limit=info.get("limit"))

"""What a Step and an EvalState share: a unit of work the chief (through the extension) hands
to the user's code, which must end it, done or failed, before the loop moves on; and what
shardps.Worker and shardps.Evaluator share: their metrics port setting."""

import os


class Unit:
    """``with unit:`` fails the unit with the exception raised in the block, or when the block
    returns without ending it (the message ``_unfinished``), and lets the loop go on; Ctrl-C
    and exits fail it and propagate. Subclasses define fail(exception) and ``_core``."""

    _unfinished = "the code returned without ending it"

    @property
    def finished(self):
        return self._core.finished

    def __enter__(self):
        return self

    def __exit__(self, kind, exception, traceback):
        from shardps.errors import FailedPrecondition
        if exception is None:
            if not self.finished:
                self.fail(FailedPrecondition(self._unfinished))
            return False
        self.fail(exception)
        return not isinstance(exception, (KeyboardInterrupt, SystemExit, GeneratorExit))


def each(next_unit, moved_on):
    """Yields next_unit() until it gives None; one the loop body left unfinished is failed
    (the message `moved_on`) when the next one is asked for."""
    from shardps.errors import FailedPrecondition
    previous = None
    while True:
        if previous is not None and not previous.finished:
            previous.fail(FailedPrecondition(moved_on))
        unit = next_unit()
        if unit is None:
            return
        previous = unit
        yield unit


def metrics_port_from(port):
    """The metrics port: `port`, else $SHARDPS_METRICS_PORT, else 0 (off). A value that is not a
    port raises InvalidArgument naming where it came from."""
    from shardps.errors import InvalidArgument
    source = "metrics_port"
    if port is None:
        port = os.environ.get("SHARDPS_METRICS_PORT", "0") or "0"
        source = "$SHARDPS_METRICS_PORT"
    try:
        value = int(port)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{source}: expected a port number, got {port!r}") from None
    if not 0 <= value <= 65535:
        raise InvalidArgument(f"{source}: must be 0 to 65535, got {value}")
    return value

"""Per-task log lines in Celery's wording, at INFO on ``sync_worker.worker.activities``.

::

    Task billing.charge[att-01H...] received
    Task billing.charge[att-01H...] succeeded in 0.012s: {'charged': 42}
    Task billing.charge[att-01H...] raised: ValueError('card expired')
    Traceback (most recent call last): ...

The id in brackets is the activity attempt id (the task id when the server sent none), so
each retry of one activity gets its own line. Results and messages are bounded
(:data:`MAX_REPR_CHARS`), tracebacks too (:data:`MAX_TRACEBACK_CHARS`, the innermost frames
kept), so a huge value never floods the log. The ``format_*`` functions are public so other
front ends (the Celery integration) print the very same lines.
"""

from __future__ import annotations

import logging
import reprlib
import traceback
from typing import Any

__all__ = [
    "MAX_REPR_CHARS",
    "MAX_TRACEBACK_CHARS",
    "bounded_repr",
    "format_raised",
    "format_received",
    "format_succeeded",
    "task_logger",
]

#: The logger of the per-task lines.
task_logger = logging.getLogger("sync_worker.worker.activities")

MAX_REPR_CHARS = 256
MAX_TRACEBACK_CHARS = 4096
MAX_LINE_CHARS = 300

_repr = reprlib.Repr()
_repr.maxstring = 120
_repr.maxother = 120
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 10
_repr.maxlevel = 4


def bounded_repr(value: Any, limit: int = MAX_REPR_CHARS) -> str:
    """``repr(value)``, shortened to at most ``limit`` characters."""
    try:
        text = _repr.repr(value)
    except Exception:  # a broken __repr__ must not break logging
        text = f"<{type(value).__name__} (repr failed)>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_received(task_type: str, task_id: str) -> str:
    return f"Task {task_type}[{task_id}] received"


def format_succeeded(task_type: str, task_id: str, seconds: float, result: Any) -> str:
    return f"Task {task_type}[{task_id}] succeeded in {seconds:.3f}s: {bounded_repr(result)}"


def format_raised(task_type: str, task_id: str, error: BaseException, *, with_traceback: bool = True) -> str:
    """The failure line, then (by default) the bounded traceback on the following lines."""
    line = f"Task {task_type}[{task_id}] raised: {bounded_repr(error)}"
    if not with_traceback or error.__traceback__ is None:
        return line
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()
    # Long lines (a huge message, a giant repr) are cut one by one, so the frames survive.
    text = "\n".join(part if len(part) <= MAX_LINE_CHARS else part[:MAX_LINE_CHARS] + "..."
                     for part in text.split("\n"))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "[... traceback truncated ...]\n" + text[-MAX_TRACEBACK_CHARS:]
    return f"{line}\n{text}"

"""How a Celery-style call travels on the wire: the activity argument list.

A task ``proj.tasks.add`` runs as the activity type ``proj.tasks.add``. Its Avro argument
list is:

* the positional arguments, unchanged, in order; then
* **only when there are keyword arguments (or call metadata)**, one trailing object::

      {"__kwargs__": {"name": value, ...}}              # keyword arguments
      {"__kwargs__": {...}, "__celery__": {...}}        # plus call metadata (optional)

  ``__celery__`` carries what Celery keeps in message headers: ``id`` (the task id inside a
  canvas), ``root_id``, ``parent_id``, ``group``. Callers outside this facade never need it.

So a workflow (``sync_worker`` or the published SDK) calls ``add(2, 3)`` as
``ctx.schedule_activity("proj.tasks.add", [2, 3])`` and ``add(2, y=3)`` as
``ctx.schedule_activity("proj.tasks.add", [2, {"__kwargs__": {"y": 3}}])``.

The trailing element is recognised only when it is an object whose keys are exactly
``{"__kwargs__"}`` or ``{"__kwargs__", "__celery__"}`` and ``__kwargs__`` is an object. A call
whose *last positional argument* happens to have that shape gets an explicit (possibly
empty) ``{"__kwargs__": {}}`` appended, so it is never misread. ``tests/integrations`` pins
this format byte for byte; it does not change without a new marker name.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = [
    "KWARGS_KEY",
    "META_KEY",
    "decode_call",
    "encode_call",
    "exponential_backoff",
    "retry_policy_for",
]

KWARGS_KEY = "__kwargs__"
#: Delay before an attempt lost with its worker runs again.
LOST_ATTEMPT_RETRY_SECONDS = 1
META_KEY = "__celery__"


def _is_marker(value: Any) -> bool:
    if not isinstance(value, dict) or KWARGS_KEY not in value or not isinstance(value[KWARGS_KEY], dict):
        return False
    return set(value) <= {KWARGS_KEY, META_KEY} and isinstance(value.get(META_KEY, {}), dict)


def encode_call(args: Sequence[Any], kwargs: Optional[Mapping[str, Any]] = None,
                meta: Optional[Mapping[str, Any]] = None) -> List[Any]:
    """The activity argument list for ``task(*args, **kwargs)``."""
    out = list(args)
    kw = dict(kwargs or {})
    for key in kw:
        if not isinstance(key, str):
            raise TypeError(f"keyword argument names must be strings, got {key!r}")
    if kw or meta or (out and _is_marker(out[-1])):
        marker: Dict[str, Any] = {KWARGS_KEY: kw}
        if meta:
            marker[META_KEY] = {k: v for k, v in meta.items() if v is not None}
        out.append(marker)
    return out


def decode_call(arguments: Sequence[Any]) -> Tuple[List[Any], Dict[str, Any], Dict[str, Any]]:
    """``(args, kwargs, meta)`` from an activity argument list (the inverse of :func:`encode_call`)."""
    items = list(arguments)
    if items and _is_marker(items[-1]):
        marker = items.pop()
        return items, dict(marker[KWARGS_KEY]), dict(marker.get(META_KEY) or {})
    return items, {}, {}


def exponential_backoff(factor: float, retries: int, maximum: Optional[float], full_jitter: bool,
                        rng: Optional[random.Random] = None) -> float:
    """Celery's autoretry countdown: ``factor * 2**retries``, capped, then jittered in ``[0, x]``."""
    countdown = float(factor) * float(2 ** max(0, retries))
    if maximum is not None:
        countdown = min(float(maximum), countdown)
    if full_jitter:
        countdown = float((rng or random).uniform(0, countdown))
    return max(0.0, countdown)


def retry_policy_for(task: Any) -> Dict[str, Any]:
    """The server-side retry policy every attempt of ``task`` is scheduled with.

    The facade decides *whether* an attempt is retried (``self.retry``, ``autoretry_for``,
    ``max_retries``): every other failure is reported non-retryable. So the server budget is
    unlimited (``max_attempts: null``); it still retries attempts lost with their worker
    (heartbeat or lease timeout), as Celery redelivers ``acks_late`` tasks, after
    ``backoff_seconds`` (1 s). *When* a requested retry runs is the failing attempt's
    ``next_retry_delay`` (the countdown), which the server applies in place of the backoff.
    """
    return {"max_attempts": None, "backoff_seconds": [LOST_ATTEMPT_RETRY_SECONDS], "non_retryable_error_types": []}

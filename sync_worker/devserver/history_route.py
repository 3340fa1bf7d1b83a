"""The history route: a page of a run's events, and its ``wait_new_event`` long poll (the client's result wait)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Dict, Optional, Tuple

from . import control
from .engine import Engine
from .util import TERMINAL_STATUSES, ApiError

__all__ = ["HISTORY_SETTLE_SECONDS", "HISTORY_WAIT_SECONDS", "serve"]


#: How long a history read with ``wait_new_event`` waits for a new event: the real server's
#: ``server.polling.timeout`` default (its HistoryController::show runs the read through LongPoller::until
#: until the page after ``next_page_token`` is not empty, woken by the run's history channel).
HISTORY_WAIT_SECONDS = 30.0


def _wait_new_event(value: Optional[str]) -> bool:
    """The query's ``wait_new_event``: the real server validates it ``['nullable', 'boolean']``. Laravel's
    rule takes ``true``/``false``/``1``/``0`` as typed values and the strings ``"1"``/``"0"``; a query
    string carries strings only, so ``"1"``/``"0"`` (or absent, or empty: null) pass and the words
    ``true``/``false`` are a 422 there and here."""
    if not value:
        return False
    if value == "1" or value == "0":
        return value == "1"
    message = "The wait new event field must be true or false."
    raise ApiError(422, "validation_failed", message, errors={"wait_new_event": [message]},
                   validation_errors={"wait_new_event": [message]})


def serve(engine: Engine, req: Any) -> Tuple[int, Any]:
    """``GET .../history`` (``req``: the route's ``Request``): a page of the run's events, with
    ``wait_new_event`` held until the page has an event (see :func:`_settled` for how long after)."""
    p = req.params

    def read() -> Tuple[int, Any]:
        # A read: under the lock, no transaction (no writer runs in between); an open batch it saw is
        # committed by the request's grouped() exit before the answer leaves.
        with engine.lock:
            return 200, control.history(engine, req.namespace, p["workflow_id"], p.get("run_id"), req.query)

    if not _wait_new_event(req.query.get("wait_new_event")):
        return read()
    deadline = time.monotonic() + min(HISTORY_WAIT_SECONDS, engine.config.long_poll_max_seconds)
    with engine.lock:  # released while waiting; an append to the run wakes the wait
        while True:
            status, body = read()
            remaining = deadline - time.monotonic()
            if body["events"] or remaining <= 0 or engine.stopping or not req.client_connected():
                break
            engine.await_events(body["run_id"], remaining)
        events = body["events"]
        if not events or body.get("next_page_token") or _settled(engine, body["run_id"], events[0], deadline):
            return status, body
        return read()  # the same page (same token), with what the run recorded meanwhile


#: How long after the first event a ``wait_new_event`` read answers with was recorded the read may hold on
#: for more of the run's events; it answers at once when the run is closed (or closes). The real
#: server's wait checks the run's history channel every ``server.polling.signal_check_interval_ms``
#: (100 ms by default: LongPoller::until sleeps between checks), so its answer comes up to 100 ms after
#: the event; answering within this window is within what it does. Every answer costs the server a
#: render and the follower a round trip: a result wait answered at every append re-read a one-activity
#: workflow's history 4-5 times, on the same cores as the chain it waits for.
HISTORY_SETTLE_SECONDS = 0.05


def _settled(engine: Engine, run_id: str, first: Dict[str, Any], deadline: float) -> bool:
    """Hold a history wait that has new events while its run is open, for at most
    :data:`HISTORY_SETTLE_SECONDS` after ``first`` (its first new event) was recorded, the wait's
    deadline or the server's stop. ``True``: it did not wait (the run is closed,
    or the event is old enough), so the read stands. Called holding the engine lock, which the waits
    release: an append happens under that lock, so none falls between a check and the next wait."""
    status = engine.store.run_status(run_id)
    if status is None or status in TERMINAL_STATUSES:
        return True
    recorded = _epoch(first.get("recorded_at"))
    hold = HISTORY_SETTLE_SECONDS if recorded is None else HISTORY_SETTLE_SECONDS - (engine.now() - recorded)
    if hold <= 0:
        return True
    until = min(deadline, time.monotonic() + min(hold, HISTORY_SETTLE_SECONDS))
    while True:  # (a client that left is noticed when the answer is written: the hold is short)
        remaining = until - time.monotonic()
        if remaining <= 0 or engine.stopping:
            return False
        engine.await_events(run_id, remaining, closing_only=True)
        status = engine.store.run_status(run_id)
        if status is None or status in TERMINAL_STATUSES:
            return False


def _epoch(stamp: Any) -> Optional[float]:
    """An event's ``recorded_at`` (``util.iso``) as epoch seconds, ``None`` if it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

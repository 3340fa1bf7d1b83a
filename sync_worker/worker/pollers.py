"""The poll loop shared by the workflow, activity and query pollers.

Each poller runs on its own task (thread) with its own back-off (§9) and status
tracker. It asks for a slot first (the single admission point, when it has a pool),
long-polls only while holding one, and hands the slot to the task it received. A
typed 429 capacity refusal is followed by exactly the server's delay and neither
advances nor resets the back-off. Shutdown cancels the token, which both aborts the
in-flight long poll and interrupts any wait.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Callable, Dict, Optional

from ..cancel import CancelToken
from ..errors import ServerError, WorkerShutdown
from ..protocol.refusals import poll_capacity_delay
from ..runtime.backend import ConcurrencyBackend
from ..runtime.backoff import PollFailureBackoff
from ..runtime.inflight import InflightTask
from ..runtime.metrics import POLL_DURATION, POLLS, MetricsRecorder, NoopMetrics
from ..runtime.slots import Slot, SlotPool, admit
from ..runtime.status import RoleTracker
from .recovery import ServerContact, unreachable

__all__ = ["Poller", "poll_timeout_seconds"]

logger = logging.getLogger("sync_worker.worker.poll")

PollFn = Callable[[str, CancelToken], Optional[Dict[str, Any]]]
#: ``dispatch(task, slot, here)``: with ``here`` the accepted task is returned to run on the poller itself
DispatchFn = Callable[[Dict[str, Any], Optional[Slot], bool], Optional[InflightTask]]

_POLL_ID_PREFIX = {"workflow": "wf-poll-", "activity": "activity-poll-", "query": "query-poll-"}


def _random_hex() -> str:
    """32 random hex digits for a poll_request_id (unique, not secret): the process's Mersenne
    Twister, reseeded in a forked child, where uuid4 costs a getrandom call and a UUID per poll."""
    return f"{random.getrandbits(128):032x}"


def poll_timeout_seconds(poll_timeout: float) -> int:
    """The wire ``timeout_seconds`` for a configured ``poll_timeout`` (§4.1)."""
    if poll_timeout < 1:
        return 0
    whole = int(poll_timeout)
    return min(60, whole if whole == poll_timeout else whole + 1)


class Poller:
    """One poll loop of one task kind (``workflow``, ``activity``, ``query``)."""

    def __init__(
        self,
        *,
        kind: str,
        task_queue: str,
        backend: ConcurrencyBackend,
        poll: PollFn,
        dispatch: DispatchFn,
        cancel: CancelToken,
        tracker: RoleTracker,
        metrics: MetricsRecorder,
        pool: Optional[SlotPool] = None,
        backoff: Optional[PollFailureBackoff] = None,
        wait_seconds: int = 0,
        contact: Optional[ServerContact] = None,
        inline: bool = False,
    ) -> None:
        self.kind = kind
        self.task_queue = task_queue
        self._backend = backend
        self._poll = poll
        self._dispatch = dispatch
        self._cancel = cancel
        self.tracker = tracker
        self._metrics = metrics
        self._pool = pool
        self.backoff = backoff or PollFailureBackoff(kind)
        self.wait_seconds = wait_seconds
        self._contact = contact
        self.error: Optional[BaseException] = None
        self._tags = {"task_kind": kind, "task_queue": task_queue}
        self._poll_id_prefix = _POLL_ID_PREFIX.get(kind, "poll-")
        #: run a received task on this poller while another poller of the role waits on the server
        self.inline = inline

    def _count(self, outcome: str, started: float) -> None:
        if type(self._metrics) is NoopMetrics:  # the default records nothing: build no tags
            return
        tags = dict(self._tags, outcome=outcome)
        self._metrics.increment(POLLS, 1.0, tags)
        self._metrics.record(POLL_DURATION, self._backend.monotonic() - started, tags)

    def run(self) -> None:
        """The loop body; returns when the cancel token fires. An error ends it (the runtime shell
        records and logs it, and fails the runtime: a poller is a critical loop)."""
        self.tracker.started()
        try:
            while not self._cancel.cancelled:
                self._poll_once()
        except BaseException as error:
            self.error = error
            raise
        finally:
            self.tracker.exited()

    def _poll_once(self) -> None:
        slot: Optional[Slot] = None
        if self._pool is not None:
            slot = admit(self._pool, self._cancel)
            if slot is None:
                return
        handed_off = here = False
        accepted: Optional[InflightTask] = None
        started = self._backend.monotonic()
        try:
            token = self.tracker.request_started()
            try:
                task = self._poll(self._poll_id_prefix + _random_hex(), self._cancel)
            except WorkerShutdown:
                self.tracker.request_abandoned(token)
                return
            except Exception as error:
                if self._cancel.cancelled:
                    self.tracker.request_abandoned(token)
                    return
                self.tracker.request_failed(error, token)
                capacity_delay = self._capacity_delay(error)
                if capacity_delay is not None:
                    delay = float(capacity_delay)
                    self._count("backpressure", started)
                    logger.info("%s poll: server at long-poll capacity; retrying in %s s", self.kind, delay)
                else:
                    self._count("error", started)
                    self.backoff.note_early_cutoff(error, self._backend.monotonic() - started, self.wait_seconds)
                    delay = self.backoff.next_delay(error)
                if slot is not None:  # do not hold a slot while waiting
                    slot.release()
                    slot = None
                if self._contact is not None and capacity_delay is None and unreachable(error):
                    self._contact.trouble()  # the heartbeat probes, and its success wakes this wait
                    self._contact.wait(delay, self._cancel)
                else:
                    self._cancel.wait(delay)
                return
            self.tracker.request_succeeded(token)
            if self._contact is not None and self.backoff.consecutive_failures:
                self._contact.succeeded()
            self.backoff.reset()
            if task is None:
                self._count("empty", started)
                return
            self._count("task", started)
            # Another poll of this role is open on the server, so the queue stays served while this
            # poller runs the task itself: no hand-off (a wake-up) between the answer and the task.
            here = self.inline and slot is not None and self.tracker.requests_in_flight() > 0
            accepted = self._dispatch(task, slot, here)
            handed_off = True
        finally:
            if slot is not None and not handed_off:
                slot.release()
        if here and accepted is not None:
            try:
                accepted.run()  # the task's body catches its own errors; it releases the slot
            except Exception:
                logger.exception("%s task %s raised out of its poller", self.kind, accepted.task_id)

    def _capacity_delay(self, error: BaseException) -> Optional[int]:
        if not isinstance(error, ServerError):
            return None
        return poll_capacity_delay(error, f"{self.kind}_task", self.task_queue)

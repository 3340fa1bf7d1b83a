"""Long polls parked on a queue, their wake-ups, and the eager hand-off of new work to one of them.

A poll that finds nothing parks on its queue's :class:`QueueWaiters`. Work a request's transaction
makes ready is not announced at once: ``Engine.notify`` notes it and, when the outermost transaction
ends (still under the engine lock), offers each piece to the oldest parked poll (:func:`hand_off`):
that poll's own claim runs in the producing thread, in a transaction of its own joined to the
producer's batch, with the same lease rows and events the poll would write after a wake-up. The
producer commits and writes the poll's answer on the poll's connection itself, right after its own
answer on a worker-plane request or a start (``Engine.hold_answers``: the receiver of the first
answer is up first; a poll answered first made the worker and client slower to take theirs), else
as soon as the transaction let the lock go; the parked poll wakes to find it answered (and sends nothing).
The serial chain loses the thread hop of each wake-up (the rest of the notifier's transaction, its
commit and answer before the woken poll had the core) and one transaction.

Whatever cannot be handed off (no parked poll that takes eagerly, a claim that finds nothing or
would refuse, a producer outside a request: the scheduler) wakes a poll as before (:meth:`produced`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

log = logging.getLogger("sync_worker.devserver")

#: The poll kinds handed off eagerly (their claims write rows only; queries and validations are in memory).
EAGER_KINDS = frozenset({"workflow", "activity"})

#: What a long poll's handler returns when its answer was (or is being) written by a producer.
ANSWERED: Dict[str, Any] = {"__answered__": True}


class Parked:
    """One parked poll: its own condition (a wake-up reaches this poll, not any), and how to serve it eagerly.

    ``take``: the poll's claim, run by a producer holding the engine lock inside a transaction, on
    the poll's behalf; it returns the poll's answer or ``None`` (then the poll is woken instead).
    ``send``: writes an answer (status, body) on the poll's connection. Both ``None``: wake-ups only.
    """

    __slots__ = ("answer", "cond", "send", "take", "woken")

    def __init__(self, lock: Any, take: Optional[Callable[[], Optional[Dict[str, Any]]]] = None,
                 send: Optional[Callable[[int, Any], None]] = None) -> None:
        self.cond = threading.Condition(lock)
        self.woken = False  # a wake-up (or an answer) already went to this poll
        self.take = take
        self.send = send
        self.answer: Optional[Dict[str, Any]] = None

    def deliver(self) -> None:
        """Write the answer (after the batch holding its lease is committed), outside the engine lock."""
        assert self.send is not None and self.answer is not None
        try:
            self.send(200, self.answer)
        except OSError:  # the client left at the last moment: as an answer its own thread could not send
            log.debug("an eagerly handed-off answer could not be written")

    def refuse(self) -> None:
        """The batch holding the lease did not commit: the poll's answer is an error, never the task."""
        assert self.send is not None
        try:
            self.send(500, {"error": "internal server error", "reason": "internal_error"})
        except OSError:
            pass


class QueueWaiters:
    """The long polls waiting on one ``(namespace, kind, queue)``, and the hand-off of wake-ups.

    Each piece of work made ready wakes one waiting poll (the oldest not woken yet), not all of
    them: with several pollers per queue, waking every one made each new task cost a thundering
    herd of thread switches and claim queries on the server's core, and the poll that won waited
    behind the others. A woken poll that then finds nothing it can take (another poll came in
    first, the task is for types or a session it does not serve, its client left, or its own wait
    timed out as the wake-up reached it) passes the wake-up on to every waiter, at most once per
    wake-up produced (:meth:`pass_on`), so nothing ready is left waiting for a poll's timeout.
    A poll served by :func:`hand_off` counts in ``handed_off``, not as a wake-up produced.
    Callers hold the engine lock (the conditions' lock).
    """

    __slots__ = ("generation", "handed_off", "lock", "passed_on", "waiting")

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.generation = 0  # wake-ups produced on this queue
        self.passed_on = 0  # the newest generation already handed to every waiter
        self.waiting: List[Parked] = []  # oldest first
        self.handed_off = 0  # polls answered by a producer

    @property
    def parked(self) -> int:
        """Polls waiting now."""
        return len(self.waiting)

    def wait(self, timeout: float, entry: Optional[Parked] = None) -> Parked:
        entry = entry if entry is not None else Parked(self.lock)
        entry.woken = False  # a poll's entry serves each of its waits
        self.waiting.append(entry)
        try:
            entry.cond.wait(timeout)
        finally:
            self.waiting.remove(entry)
        return entry

    def produced(self) -> None:
        self.generation += 1
        for entry in self.waiting:
            if not entry.woken:
                entry.woken = True
                entry.cond.notify()
                return

    def wake_all(self) -> None:
        for entry in self.waiting:
            entry.woken = True
            entry.cond.notify()

    def pass_on(self, seen: int) -> None:
        """A poll that waited since generation ``seen`` takes nothing: hand any wake-up produced
        meanwhile to all the other waiters (once per generation)."""
        if self.generation != seen and self.passed_on < self.generation:
            self.passed_on = self.generation
            self.wake_all()

    def first_free(self) -> Optional[Parked]:
        """The oldest poll that no wake-up reached yet (the one :meth:`produced` would wake)."""
        for entry in self.waiting:
            if not entry.woken:
                return entry
        return None


def hand_off(engine: Engine, noted: List[Tuple[str, str, str]]) -> List[Parked]:
    """Offer each piece of work a transaction made ready to the oldest parked poll of its queue.

    The caller holds the engine lock and has just ended its outermost transaction (committed, or
    left in an open group-commit batch). Each claim runs in a transaction of its own, joined to
    that batch; when a poll was served the batch is committed here, and the served polls are returned
    for the caller to answer (:meth:`Parked.deliver`, after it let the lock go). A commit that fails
    answers them with an error, never with the task. Every piece not handed off wakes a poll as before.
    """
    served: List[Parked] = []
    for key in noted:
        waiting = engine.queue_waiters(key)
        if waiting is None:
            continue
        entry = waiting.first_free()
        answer: Optional[Dict[str, Any]] = None
        if entry is not None and entry.take is not None and not engine.stopping:
            try:
                with engine.tx():
                    answer = entry.take()
            except Exception:  # the claim failed: its transaction rolled back; the poll claims itself
                log.debug("eager hand-off failed on %s", key, exc_info=True)
                answer = None
        if entry is None or answer is None:
            waiting.produced()
            continue
        entry.answer = answer
        entry.woken = True
        entry.cond.notify()
        waiting.handed_off += 1
        served.append(entry)
    if served:
        try:
            engine.store.flush()
        except BaseException:
            for entry in served:
                entry.refuse()
            raise
    return served

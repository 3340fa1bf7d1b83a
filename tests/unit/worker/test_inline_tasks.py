"""A poller runs the task it received itself while another poller of its role waits on the server.

Randomized: activity tasks arrive at random gaps on several pollers while slots finish at random
times, and the worker is stopped in the middle. Every leased task runs exactly once and is reported
exactly once, none is lost or run after it was left in the queue, the slot limit and the in-flight
count are never exceeded, and some tasks ran on a poller, some on a slot unit (both paths taken).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Dict, List, Optional

import pytest

from sync_worker import activity
from sync_worker.cancel import CancelToken
from sync_worker.runtime.backend import ThreadBackend
from sync_worker.runtime.metrics import NoopMetrics
from sync_worker.runtime.shell import RuntimeShell, ShutdownIncomplete
from sync_worker.runtime.slots import SlotPool, admit
from sync_worker.runtime.status import RoleTracker, StatusBoard
from sync_worker.worker import Worker, WorkerState
from sync_worker.worker.pollers import Poller

from .fakes import FakeClient, in_thread
from .test_shell_stop_intake import IntakeSource
from .test_worker_runtime import Running, activity_task, wait_for


class LeasingClient(FakeClient):
    """The fake worker plane, noting which tasks a poll handed out (leased)."""

    def __init__(self) -> None:
        super().__init__()
        self.leased: List[str] = []
        self.late: List[str] = []  # leased by a poll that began after the stop cancelled polling
        self.stopped_at: Optional[float] = None

    def poll_activity_task(self, *, cancel: Optional[CancelToken] = None, **kw: Any) -> Any:
        began = time.monotonic()
        task = super().poll_activity_task(cancel=cancel, **kw)
        if task is not None:
            with self.lock:
                self.leased.append(task["task_id"])
                if self.stopped_at is not None and began > self.stopped_at:
                    self.late.append(task["task_id"])
        return task

    def note_stop(self) -> None:
        with self.lock:
            self.stopped_at = time.monotonic()


class Book:
    """What the activity saw: runs per task, the most running at once, which unit ran each."""

    def __init__(self, rng: random.Random) -> None:
        self.lock = threading.Lock()
        self.rng = rng
        self.runs: Dict[str, int] = {}
        self.running = 0
        self.most = 0
        self.units: Dict[str, str] = {}


BOOK: Optional[Book] = None


@activity.defn(name="inline.work")
def work(task_id: str) -> str:
    book = BOOK
    assert book is not None
    with book.lock:
        book.runs[task_id] = book.runs.get(task_id, 0) + 1
        book.running += 1
        book.most = max(book.most, book.running)
        book.units[task_id] = threading.current_thread().name
        pause = book.rng.choice((0.0, 0.0, 0.0005, 0.002, 0.006))
    time.sleep(pause)
    with book.lock:
        book.running -= 1
    return task_id


@pytest.mark.parametrize("seed", range(8))
def test_random_arrivals_and_a_stop_in_the_middle_run_every_leased_task_once(seed: int) -> None:
    global BOOK
    rng = random.Random(seed)
    slots, pollers, total = rng.choice((1, 2, 3, 5)), rng.choice((2, 3, 4)), rng.randint(60, 140)
    book = BOOK = Book(random.Random(seed + 1000))
    client = LeasingClient()
    worker = Worker(client, task_queue="q", activities=[work], pool="threads", max_concurrent_activity_tasks=slots,
                    max_concurrent_activity_task_polls=pollers, shutdown_timeout=10.0, heartbeat_interval=60.0)
    stop_after = rng.randint(total // 3, total - 1)
    in_flight_seen: List[int] = []
    with Running(worker):
        worker.source.poll_cancel.add_callback(client.note_stop)
        for n in range(total):
            client.activity_tasks.put(activity_task(f"t{seed}-{n}", "inline.work", f"t{seed}-{n}"))
            in_flight_seen.append(worker.shell.inflight.count("activity"))
            if n == stop_after:
                break
            time.sleep(rng.choice((0.0, 0.0, 0.0002, 0.001, 0.004)))
        worker.stop()  # warm: drains what was leased
        assert worker.state is WorkerState.STOPPED
        assert worker.shell.inflight.count() == 0 and worker.task_slots()["activity_available"] == slots
    assert client.stopped_at is not None and not client.late, "a poll began after the stop"
    left = []
    while not client.activity_tasks.empty():
        left.append(client.activity_tasks.get_nowait()["task_id"])
    completed = [call[1] for call in client.find("complete_activity")]
    assert sorted(client.leased) == sorted(set(client.leased)), "a task was leased twice"
    assert sorted(completed) == sorted(client.leased), "every leased task is reported exactly once"
    assert sorted(book.runs) == sorted(client.leased) and set(book.runs.values()) == {1}
    assert not set(left) & set(book.runs), "a task left in the queue ran"
    assert len(client.leased) + len(left) == stop_after + 1, "a task was lost"
    assert book.most <= slots and max(in_flight_seen) <= slots


def test_both_paths_are_taken_across_the_random_runs() -> None:
    """The runs above reach both the poller (inline) and the slot-unit path (hand-off)."""
    global BOOK
    book = BOOK = Book(random.Random(7))
    client = LeasingClient()
    worker = Worker(client, task_queue="q", activities=[work], pool="threads", max_concurrent_activity_tasks=4,
                    max_concurrent_activity_task_polls=3, shutdown_timeout=10.0, heartbeat_interval=60.0)
    with Running(worker):
        wait_for(lambda: worker.status().role("activity") is not None
                 and worker.status().role("activity").in_flight_seconds is not None)  # type: ignore[union-attr]
        for n in range(40):
            client.activity_tasks.put(activity_task(f"b-{n}", "inline.work", f"b-{n}"))
            time.sleep(0.003 if n % 2 else 0.0)
        wait_for(lambda: len(client.find("complete_activity")) == 40, timeout=10)
    units = list(book.units.values())
    on_pollers = [u for u in units if u.startswith("sync-worker-activity-poller")]
    assert on_pollers and len(on_pollers) < len(units), units


def _poller(tracker: RoleTracker, pool: SlotPool, dispatched: List[bool], cancel: CancelToken,
            answers: List[Optional[Dict[str, Any]]]) -> Poller:
    def poll(_id: str, _cancel: CancelToken) -> Optional[Dict[str, Any]]:
        answer = answers.pop(0)
        if not answers:
            cancel.cancel()
        return answer

    def dispatch(task: Dict[str, Any], slot: Any, here: bool) -> None:
        dispatched.append(here)
        slot.release()

    return Poller(kind="activity", task_queue="q", backend=ThreadBackend(), poll=poll, dispatch=dispatch,
                  cancel=cancel, tracker=tracker, metrics=NoopMetrics(), pool=pool, inline=True)


def test_a_poller_runs_a_task_itself_only_while_another_poll_of_its_role_is_open() -> None:
    backend = ThreadBackend()
    tracker = RoleTracker("activity", backend.monotonic, overdue_seconds=60, stall_seconds=120, is_poller=True)
    pool = SlotPool(backend, "activity", 2)
    dispatched: List[bool] = []
    alone = _poller(tracker, pool, dispatched, CancelToken(backend.event), [{"task_id": "a"}])
    alone.run()
    assert dispatched == [False]  # nobody else polls: handed to a slot unit, this poller polls on
    other = tracker.request_started()  # another poller's long poll is open
    covered = _poller(tracker, pool, dispatched, CancelToken(backend.event), [{"task_id": "b"}])
    covered.run()
    assert dispatched == [False, True]
    tracker.request_succeeded(other)
    assert tracker.requests_in_flight() == 0 and pool.in_use == 0


class InlineSource(IntakeSource):
    """An intake loop that accepts one task, runs it itself (``spawn_task(..., here=True)``) and
    needs a moment after the task ended before the loop returns (a thread not scheduled at once)."""

    def __init__(self, calls: List[str], release: threading.Event, grace: float = 0.05) -> None:
        super().__init__(calls)
        self.release = release
        self.grace = grace
        self.ran: List[str] = []

    def start(self, shell: RuntimeShell) -> None:
        self.shell = shell
        shell.spawn_loop("poller", self._loop, role="activity poller", intake=True)

    def _loop(self) -> None:
        assert self.shell is not None
        pool = SlotPool(self.shell.backend, "activity", 1)
        slot = admit(pool, CancelToken(self.shell.backend.event))
        assert slot is not None

        def body(inflight: Any) -> str:
            self.release.wait(10)
            self.ran.append("task")
            return "completed"

        self.shell.spawn_task("activity", "t-1", slot, body, here=True).run()
        time.sleep(0.2)  # after the in-flight set is empty, before the loop is seen to end

    def intake_grace(self) -> float:
        return self.grace  # (0.05: the task outlasts it, the shell's first join of the loop gives up)


def test_the_drain_lets_a_poller_that_ran_its_last_task_itself_end_cleanly() -> None:
    calls: List[str] = []
    release = threading.Event()
    shell = RuntimeShell(label="worker", runtime_id="w-1", backend=ThreadBackend(),
                         board=StatusBoard("w-1", "default", "q", time.monotonic), shutdown_timeout=5.0)
    source = InlineSource(calls, release)
    shell.attach(source)
    shell.begin()
    shell.start()
    wait_for(lambda: shell.inflight.count("activity") == 1)
    assert shell.inflight.snapshot()[0].handle is None  # runs on the loop's own unit, not spawned
    stopper, raised = in_thread(shell.stop)
    time.sleep(0.3)
    release.set()
    stopper.join(10)
    assert raised == [] and source.ran == ["task"]
    assert calls[-2:] == ["wind_down", "close(clean=True)"] and shell.board.state is WorkerState.STOPPED


def test_a_cold_stop_does_not_wait_for_a_poller_that_runs_a_task_itself() -> None:
    calls: List[str] = []
    release = threading.Event()
    shell = RuntimeShell(label="worker", runtime_id="w-1", backend=ThreadBackend(),
                         board=StatusBoard("w-1", "default", "q", time.monotonic), shutdown_timeout=30.0)
    shell.attach(InlineSource(calls, release, grace=5.0))
    shell.begin()
    shell.start()
    wait_for(lambda: shell.inflight.count("activity") == 1)
    started = time.monotonic()
    try:
        with pytest.raises(ShutdownIncomplete) as stopped:
            shell.stop(cold=True)
        assert time.monotonic() - started < 1.0  # not the 5 s intake grace
        assert "activity:t-1" in stopped.value.running and shell.inflight.snapshot()[0].abandoned
        assert calls[-2:] == ["hand_back", "close(clean=False)"]
    finally:
        release.set()

"""Work made ready wakes one waiting long poll, and a wake-up that poll cannot use is passed on.

Over real sockets: several polls park on one queue; a new task wakes one of them (not the whole
herd); a poll woken for a task it cannot take (another type, or its own timeout arriving at the
same moment) hands the wake-up to the others, so no ready task waits out a long poll. The
randomized race mixes types, short and long poll timeouts and bursts of work, and checks every
task is taken promptly.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer() as dev:
        yield dev


def _register(server: DevServer, worker_id: str, activity_type: str) -> None:
    Raw(server.url).ok("POST", "/worker/register", {"worker_id": worker_id, "task_queue": "q",
                                                    "supported_workflow_types": [],
                                                    "supported_activity_types": [activity_type]}, plane="worker")


def _poll(server: DevServer, worker_id: str, timeout: int) -> Dict[str, Any]:
    raw = Raw(server.url)
    raw.registered.add(("default", worker_id))
    return dict(raw.ok("POST", "/worker/activity-tasks/poll",
                       {"worker_id": worker_id, "task_queue": "q", "timeout_seconds": timeout}, plane="worker"))


def _schedule(raw: Raw, activity_id: str, activity_type: str) -> None:
    raw.ok("POST", "/activities", {"activity_id": activity_id, "activity_type": activity_type, "task_queue": "q",
                                   "input": envelope([activity_id])})


def _parked(server: DevServer, count: int) -> None:
    """Wait until ``count`` polls wait on the activity queue ``q``."""
    waiting = server.engine.waiters("default", "activity", "q")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with server.engine.lock:
            if waiting.parked >= count:
                return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} polls parked")


def test_a_task_wakes_one_of_the_waiting_polls(server: DevServer) -> None:
    _register(server, "w", "act.one")
    answers: List[Dict[str, Any]] = []
    polls = [threading.Thread(target=lambda: answers.append(_poll(server, "w", 3))) for _ in range(4)]
    for poll in polls:
        poll.start()
    _parked(server, 4)
    _schedule(Raw(server.url), "a-1", "act.one")
    deadline = time.monotonic() + 2
    while not answers and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(answers) == 1 and answers[0]["task"]["workflow_id"] == "a-1"
    waiting = server.engine.waiters("default", "activity", "q")
    with server.engine.lock:
        # one wake-up produced, none passed on to the herd: the other three stayed parked
        assert (waiting.generation, waiting.passed_on, waiting.parked) == (1, 0, 3)
    for poll in polls:
        poll.join(10)
    assert [a["task"] for a in answers[1:]] == [None, None, None]


def test_a_wake_up_the_first_poll_cannot_use_reaches_the_one_that_can(server: DevServer) -> None:
    _register(server, "w-one", "act.one")
    _register(server, "w-two", "act.two")
    answers: Dict[str, Tuple[float, Dict[str, Any]]] = {}

    def poll(worker_id: str) -> None:
        got = _poll(server, worker_id, 8)
        answers[worker_id] = (time.monotonic(), got)

    first = threading.Thread(target=poll, args=("w-one",))
    first.start()
    _parked(server, 1)  # w-one waits longest: a single wake-up goes to it first
    second = threading.Thread(target=poll, args=("w-two",))
    second.start()
    _parked(server, 2)
    scheduled = time.monotonic()
    _schedule(Raw(server.url), "for-two", "act.two")
    second.join(5)
    assert "w-two" in answers, "the wake-up was not passed on: w-two still waits"
    assert answers["w-two"][0] - scheduled < 2.0
    assert answers["w-two"][1]["task"]["workflow_id"] == "for-two"
    assert "w-one" not in answers  # woken, found nothing of its type, waits again
    _schedule(Raw(server.url), "for-one", "act.one")
    first.join(5)
    assert answers["w-one"][1]["task"]["workflow_id"] == "for-one"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomized_pollers_and_bursts_leave_no_task_waiting(server: DevServer, seed: int) -> None:
    """Two types; ``act.short`` pollers use 1 s long polls (their timeouts race the wake-ups),
    ``act.long`` pollers 20 s ones (a lost wake-up would strand a task for ~20 s). Every task must
    be taken within a second of being scheduled."""
    rng = random.Random(seed)
    kinds = {"act.short": 1, "act.long": 20}
    for kind in kinds:
        _register(server, f"w-{kind}", kind)
    taken: Dict[str, float] = {}
    stop = threading.Event()

    def poller(kind: str) -> None:
        while not stop.is_set():
            got = _poll(server, f"w-{kind}", kinds[kind])
            if got["task"] is not None:
                taken[got["task"]["workflow_id"]] = time.monotonic()

    threads = [threading.Thread(target=poller, args=(kind,), daemon=True) for kind in kinds for _ in range(3)]
    for thread in threads:
        thread.start()
    _parked(server, 6)
    raw = Raw(server.url)
    scheduled: Dict[str, float] = {}
    for n in range(60):
        activity_id = f"a-{n}"
        _schedule(raw, activity_id, rng.choice(list(kinds)))
        scheduled[activity_id] = time.monotonic()
        if rng.random() < 0.7:  # bursts, and pauses around the short polls' 1 s timeouts
            time.sleep(rng.choice([0.0, 0.002, 0.02, 0.2, 0.9, 1.0]) * rng.random())
    deadline = time.monotonic() + 5
    while len(taken) < len(scheduled) and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    assert sorted(taken) == sorted(scheduled), sorted(set(scheduled) - set(taken))
    late = {a: round(taken[a] - scheduled[a], 3) for a in scheduled if taken[a] - scheduled[a] > 1.0}
    assert not late, f"tasks that waited for a poll's timeout instead of a wake-up: {late}"
    # let the 20 s pollers go: one task each of their type ends their poll
    for n in range(3):
        _schedule(raw, f"release-{n}", "act.long")

"""Long polls racing new work: every task leased once, none stranded.

Over real sockets. The randomized race parks and releases many polls at once: some time out on the
server (short long polls racing the wake-ups), some clients leave mid-poll, some retry their poll
with the same ``poll_request_id`` after giving up on the first answer, while tasks are produced at
random gaps (bursts, pauses around the polls' timeouts). Every task must be completed, each lease
must reach at most one poll (a retry of the same poll may get its own lease again), and a lease
handed to a client that left comes back when it expires, never stranded. (Written for an eager
hand-off of new work to a parked poll, measured and not kept: see bench/README.md; it guards the
wake-up path of ``QueueWaiters`` as it is, and any such change later.)
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Set, Tuple

import pytest
import requests

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import WORKER, Raw


@pytest.fixture
def server() -> Iterator[DevServer]:
    # short activity leases: a lease answered to a client that already left comes back within ~1 s
    with DevServer(activity_task_lease_seconds=1.0) as dev:
        yield dev


def _poll(session: requests.Session, url: str, body: Dict[str, Any], client_timeout: float) -> Any:
    resp = session.post(f"{url}/api/worker/activity-tasks/poll", json=body,
                        headers={**WORKER, "X-Namespace": "default"}, timeout=client_timeout)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize("seed", [11, 12])
def test_randomized_parking_leaving_and_timeouts_lease_each_task_once_and_strand_none(
        server: DevServer, seed: int) -> None:
    rng = random.Random(seed)
    url = server.url
    Raw(url).ok("POST", "/worker/register", {"worker_id": "w", "task_queue": "q", "supported_activity_types": ["a"]},
                plane="worker")
    lock = threading.Lock()
    #: task_id (one lease) -> the poll_request_ids that received it
    leased_to: Dict[str, Set[str]] = {}
    completed: Set[str] = set()
    stop = threading.Event()

    def complete(session: requests.Session, task: Dict[str, Any]) -> None:
        resp = session.post(f"{url}/api/worker/activity-tasks/{task['task_id']}/complete",
                            json={"activity_attempt_id": task["activity_attempt_id"], "lease_owner": "w",
                                  "result": envelope(1)}, headers={**WORKER, "X-Namespace": "default"}, timeout=15)
        if resp.status_code == 200:
            with lock:
                completed.add(task["workflow_id"])

    def received(poll_id: str, answer: Any) -> None:
        task = answer.get("task")
        if task is None:
            return
        with lock:
            leased_to.setdefault(task["task_id"], set()).add(poll_id)

    def poller(worker_rng: random.Random) -> None:
        session = requests.Session()
        while not stop.is_set():
            poll_id = str(uuid.uuid4())
            mode = worker_rng.choice(["short", "short", "normal", "leave", "retry"])
            body = {"worker_id": "w", "task_queue": "q", "poll_request_id": poll_id,
                    "timeout_seconds": worker_rng.choice([0.01, 0.05, 0.2, 0.5]) if mode == "short" else 2}
            try:
                if mode in ("leave", "retry"):  # the client gives up on this poll and hangs up
                    try:
                        received(poll_id, _poll(session, url, body, worker_rng.uniform(0.01, 0.3)))
                    except requests.exceptions.ReadTimeout:
                        session.close()
                        session = requests.Session()
                        if mode == "leave":
                            continue
                        # the same poll again: it gets the lease its first try took, if any, else claims anew
                    else:
                        if mode == "leave":
                            continue
                answer = _poll(session, url, body, 10)
            except requests.exceptions.ConnectionError:
                session = requests.Session()
                continue
            received(poll_id, answer)
            if answer.get("task") is not None:
                complete(session, answer["task"])

    threads = [threading.Thread(target=poller, args=(random.Random(rng.random()),), daemon=True) for _ in range(6)]
    for thread in threads:
        thread.start()
    producer = Raw(url)
    scheduled: List[str] = []
    for n in range(70):
        activity_id = f"a-{seed}-{n}"
        producer.ok("POST", "/activities", {"activity_id": activity_id, "activity_type": "a", "task_queue": "q",
                                            "input": envelope([n]),
                                            "retry_policy": {"max_attempts": 50, "backoff_seconds": [0]}})
        scheduled.append(activity_id)
        if rng.random() < 0.7:
            time.sleep(rng.choice([0.0, 0.001, 0.01, 0.05, 0.2]) * rng.random())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if completed >= set(scheduled):
                break
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(15)
    with lock:
        missing = sorted(set(scheduled) - completed)
        twice: List[Tuple[str, Set[str]]] = [(t, ids) for t, ids in leased_to.items() if len(ids) > 1]
    assert not missing, f"tasks never completed (stranded or lost): {missing}"
    assert not twice, f"one lease answered to several polls: {twice}"
    with server.engine.lock:
        waiting = server.engine.waiters("default", "activity", "q")
        assert waiting.generation > 0  # the race went through the wake-ups of parked polls
        states = [row["state"] for row in server.engine.store.select("activities", "1 = 1", ())]
    assert states and set(states) == {"done"}, sorted(set(states))

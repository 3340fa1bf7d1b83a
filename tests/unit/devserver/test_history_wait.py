"""``wait_new_event`` history reads hold on for more of an open run's events (``routes.HISTORY_SETTLE_SECONDS``
after the first new event was recorded) and answer at once when the run closes: no event is lost or
repeated, whatever the race between the appends and the follower's reads."""

from __future__ import annotations

import base64
import random
import threading
import time
from typing import Any, Dict, List

from sync_worker.devserver import DevServer, routes
from tests.unit.devserver._raw import Raw


def _token(sequence: int) -> str:
    return base64.b64encode(str(sequence).encode()).decode()


def _follow(raw: Raw, path: str, out: List[Any], closed_at: List[float]) -> None:
    """Read the run's history with ``wait_new_event`` from the last sequence seen until it closes."""
    last = 0
    while True:
        query = f"?wait_new_event=1&next_page_token={_token(last)}" if last else "?wait_new_event=1"
        page = raw.ok("GET", path + query)
        answered = time.monotonic()
        for event in page["events"]:
            out.append((event, answered))
        if page["events"]:
            last = page["events"][-1]["sequence"]
        if any(e["event_type"] == "WorkflowTerminated" for e in page["events"]):
            closed_at.append(answered)
            return


def test_a_held_read_answers_when_the_run_closes_and_loses_no_event(dev_server: DevServer) -> None:
    raw = Raw(dev_server.url)
    rng = random.Random(29)
    for round_ in range(12):
        workflow_id = f"wf-race-{round_}"
        run_id = raw.start(workflow_id)["run_id"]
        path = f"/workflows/{workflow_id}/runs/{run_id}/history"
        seen: List[Any] = []
        closed_at: List[float] = []
        follower = threading.Thread(target=_follow, args=(raw, path, seen, closed_at))
        follower.start()
        signals = rng.randint(0, 6)
        for n in range(signals):  # each signal appends an event; random gaps race the follower's reads
            time.sleep(rng.choice((0.0, 0.0005, 0.002, 0.01, 0.06)))
            raw.ok("POST", f"/workflows/{workflow_id}/signal/s{n}", {"input": []})
        time.sleep(rng.choice((0.0, 0.001, 0.03, 0.07)))
        terminated = time.monotonic()
        raw.ok("POST", f"/workflows/{workflow_id}/terminate", {"reason": "done"})
        follower.join(10)
        assert not follower.is_alive()
        recorded = raw.ok("GET", path + "?page_size=1000")["events"]
        # every event exactly once, in order: none lost between a check and a wait, none repeated
        assert [e["sequence"] for e, _ in seen] == [e["sequence"] for e in recorded]
        assert [e["event_type"] for e, _ in seen] == [e["event_type"] for e in recorded]
        assert recorded[-1]["event_type"] == "WorkflowTerminated"
        # the close is answered at once, not at the end of a hold
        assert closed_at[0] - terminated < routes.HISTORY_SETTLE_SECONDS + 0.5


def test_a_held_read_answers_within_the_settle_window_while_the_run_stays_open(dev_server: DevServer) -> None:
    raw = Raw(dev_server.url)
    run_id = raw.start("wf-open")["run_id"]
    path = f"/workflows/wf-open/runs/{run_id}/history"
    last = raw.ok("GET", path)["events"][-1]["sequence"]
    answers: List[Dict[str, Any]] = []

    def follow() -> None:
        answers.append(raw.ok("GET", f"{path}?wait_new_event=1&next_page_token={_token(last)}"))

    waiter = threading.Thread(target=follow)
    waiter.start()
    time.sleep(0.2)
    signalled = time.monotonic()
    raw.ok("POST", "/workflows/wf-open/signal/first", {"input": []})
    time.sleep(routes.HISTORY_SETTLE_SECONDS / 5)
    raw.ok("POST", "/workflows/wf-open/signal/second", {"input": []})  # within the hold: the same answer
    waiter.join(5)
    waited = time.monotonic() - signalled
    events = answers[0]["events"]
    assert len(events) == 2 and [e["sequence"] for e in events] == [last + 1, last + 2]
    assert routes.HISTORY_SETTLE_SECONDS * 0.8 <= waited < routes.HISTORY_SETTLE_SECONDS + 1.0
    # an event older than the window is answered at once (a reader catching up is not held)
    time.sleep(routes.HISTORY_SETTLE_SECONDS)
    started = time.monotonic()
    assert raw.ok("GET", f"{path}?wait_new_event=1&next_page_token={_token(last)}")["events"] == events
    assert time.monotonic() - started < routes.HISTORY_SETTLE_SECONDS

"""Celery-facade tasks on the dev server, deterministic: every answer, row and event, as JSON on stdout.

Run as a script (``python _celery_task_dump.py [TREE]``, ``TREE``: a directory holding the
``sync_worker`` to run): it fixes ``os.urandom``, ``secrets.token_hex`` and ``time.time`` for its
own process only, and the engine runs on a virtual clock. ``celery_task_golden.json`` is its output
on the tree before issue 29's describe / route / start changes (main at d7dc0a5).
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import sys
import tempfile
import time
from typing import Any, Dict, List


def _fix_randomness() -> None:
    counter = itertools.count()
    ticks = itertools.count()
    os.urandom = lambda k: bytes([next(counter) % 256 for _ in range(k)])
    secrets.token_hex = lambda k=16: "ab" * (k or 16)
    time.time = lambda: 1800000000.0 + next(ticks) * 0.001


def main() -> None:
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
    _fix_randomness()
    from sync_worker.devserver.clock import VirtualClock
    from sync_worker.devserver.encoding import encode_body
    from sync_worker.devserver.engine import Config, Engine
    from sync_worker.devserver.queries import QueryBroker
    from sync_worker.devserver.routes import Request, Routes
    from sync_worker.payloads import envelope

    clock = VirtualClock(1800000000.0, real=lambda: 0.0)
    engine = Engine(Config(), os.path.join(tempfile.mkdtemp(), "dump.sqlite"), clock=clock)
    routes = Routes(engine, QueryBroker(engine))
    answers: List[Any] = []

    def call(path: str, body: Dict[str, Any], plane: str = "worker", method: str = "POST") -> Any:
        clock.advance(0.001)
        handler, params, _ = routes.match(method, path)
        assert handler is not None, path
        request = Request(method=method, path=path, query={}, headers={}, namespace="default", plane=plane,
                          body=body, params=params)
        with engine.grouped():
            status, answer = handler(routes, request)
        answers.append([status, json.loads(encode_body(answer))])
        return answer

    def describe(task_id: str) -> None:
        call(f"/api/activities/{task_id}", {}, plane="control", method="GET")

    call("/api/worker/register", {"worker_id": "w1", "task_queue": "q", "supported_activity_types": ["noop"]})
    for n in range(3):
        task_id = f"celery-{n}"
        call("/api/activities", {
            "activity_type": "noop", "task_queue": "q", "activity_id": task_id, "input": envelope([n]),
            "retry_policy": {"max_attempts": None, "backoff_seconds": [1], "non_retryable_error_types": []},
            "start_to_close_timeout_seconds": 86400, "heartbeat_timeout_seconds": 30}, plane="control")
        describe(task_id)
        task = call("/api/worker/activity-tasks/poll", {"worker_id": "w1", "task_queue": "q", "timeout_seconds": 0,
                                                        "poll_request_id": f"p{n}"})["task"]
        describe(task_id)
        attempt = {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": "w1"}
        if n == 1:
            call(f"/api/worker/activity-tasks/{task['task_id']}/fail",
                 {**attempt, "failure": {"message": "boom", "type": "E", "non_retryable": True}})
        else:
            call(f"/api/worker/activity-tasks/{task['task_id']}/complete", {**attempt, "result": envelope(n)})
        describe(task_id)
    call("/api/activities", {}, plane="control", method="GET")
    conn = engine.store._conn
    out: Dict[str, Any] = {"answers": answers}
    for table in ("runs", "activities", "events", "workers", "kv"):
        out[table] = [list(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2")]
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()

"""The app the embedding tests serve: a tiny WSGI app and a worker factory (real gunicorn/uWSGI load it).

``embed.work(tag, seconds)`` heartbeats while it "works" and leaves marker files in
``$EMBED_TEST_DIR`` (``tag.attempt.start`` / ``tag.attempt.done``, holding the pid), so a test
can see which web process runs which attempt, kill it, or signal its server.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List
from urllib.parse import parse_qs

from sync_worker import activity, workflow
from sync_worker.embed import HealthMiddleware
from sync_worker.worker import Worker


def _mark(name: str) -> None:
    directory = os.environ.get("EMBED_TEST_DIR")
    if directory:
        with open(os.path.join(directory, name), "w", encoding="ascii") as handle:
            handle.write(str(os.getpid()))


@activity.defn(name="embed.work")
def work(tag: str, seconds: float) -> Dict[str, Any]:
    context = activity.context()
    attempt = context.info.attempt_number
    _mark(f"{tag}.{attempt}.start")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        context.heartbeat_sync({"tag": tag})
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    _mark(f"{tag}.{attempt}.done")
    return {"pid": os.getpid(), "attempt": attempt}


@workflow.defn(name="embed.flow")
class Flow:
    def run(self, ctx: Any, tag: str, seconds: float) -> Any:
        result = yield ctx.schedule_activity(
            "embed.work", [tag, seconds], start_to_close_timeout=60, heartbeat_timeout=2,
            retry_policy={"max_attempts": 5, "backoff_seconds": [0.5]})
        return result


def build(client: Any, concurrency: int) -> Worker:
    """The factory named by SYNC_WORKER_FACTORY=tests.integrations.embed.worker_app:build."""
    return Worker(client, task_queue=os.environ["EMBED_TEST_QUEUE"], workflows=[Flow], activities=[work],
                  max_concurrent_activity_tasks=concurrency, poll_timeout=5.0, shutdown_timeout=30.0)


def build_two(client: Any, concurrency: int) -> List[Worker]:
    """Two workers, one per task queue (``$EMBED_TEST_QUEUE`` and ``$EMBED_TEST_QUEUE-b``)."""
    queue = os.environ["EMBED_TEST_QUEUE"]
    return [Worker(client, task_queue=name, workflows=[Flow], activities=[work], poll_timeout=5.0,
                   max_concurrent_activity_tasks=concurrency) for name in (queue, f"{queue}-b")]


def _hello(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
    """``/?sleep=S`` answers after S seconds; ``&mark=NAME`` first leaves the marker ``NAME.<pid>``."""
    query = parse_qs(environ.get("QUERY_STRING") or "")
    if "mark" in query:
        _mark(f"{query['mark'][0]}.{os.getpid()}")
    delay = float(query.get("sleep", ["0"])[0])
    if delay:
        time.sleep(delay)
    body = f"hello from {os.getpid()}\n".encode("ascii")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


application = HealthMiddleware(_hello)

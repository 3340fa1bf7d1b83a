"""The app of ``bench/embed_latency.py``: a small WSGI page and an I/O-bound activity factory."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List

from sync_worker import Worker, activity
from sync_worker.embed import HealthMiddleware


@activity.defn(name="bench.embed.io")
def io_activity(seconds: float) -> int:
    """Waits on I/O for ``seconds``: sleeps in 0.2 s steps, one heartbeat (an HTTP call) per step."""
    context = activity.context()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.2)
        context.heartbeat_sync()
    return os.getpid()


def build(client: Any, concurrency: int) -> Worker:
    return Worker(client, task_queue=os.environ["BENCH_QUEUE"], activities=[io_activity],
                  max_concurrent_activity_tasks=concurrency, poll_timeout=5.0)


def _page(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
    # A little work per request, like rendering a small template.
    body = ("<ul>" + "".join(f"<li>item {i}</li>" for i in range(200)) + "</ul>").encode()
    start_response("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))])
    return [body]


application = HealthMiddleware(_page)

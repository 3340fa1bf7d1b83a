"""Quickstart: a worker with a couple of activities and a workflow, end to end.

Run it with no arguments and it starts an embedded dev server, runs a worker on threads,
starts two standalone activities and one workflow that calls them, prints the results
and stops everything::

    python examples/activities_worker.py
    python examples/activities_worker.py --server-url http://127.0.0.1:8080   # your own server

The same activities and workflow run unchanged under ``sync-worker run`` (see docs/worker.md).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
import time
import uuid
from typing import Any, Iterator, List, Optional

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.worker import Worker


@activity.defn(name="quickstart.greet")
def greet(name: str) -> str:
    return f"Hello, {name}!"


@activity.defn(name="quickstart.count_words")
def count_words(text: str) -> int:
    ctx = activity.context()
    words = 0
    for index, _ in enumerate(text.split()):
        words += 1
        if index % 100 == 0:
            ctx.heartbeat_sync({"words": words})  # progress; raises ActivityCancelled if cancelled
    return words


@workflow.defn(name="quickstart.welcome")
class Welcome:
    def run(self, ctx: Any, name: str) -> Any:
        greeting = yield ctx.schedule_activity("quickstart.greet", [name])
        length = yield ctx.schedule_activity("quickstart.count_words", [greeting])
        return {"greeting": greeting, "words": length}


@contextlib.contextmanager
def server_url(url: Optional[str]) -> Iterator[str]:
    if url:
        yield url
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        print(f"started an embedded dev server at {server.url}")
        yield server.url


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default=None, help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    with server_url(args.server_url) as url:
        client = Client(url)
        task_queue = f"quickstart-{uuid.uuid4().hex[:8]}"
        worker = Worker(client, task_queue=task_queue, workflows=[Welcome], activities=[greet, count_words],
                        poll_timeout=5.0)
        runner = threading.Thread(target=worker.run, name="quickstart-worker", daemon=True)
        runner.start()
        try:
            started = client.start_activity("quickstart.greet", "standalone world", task_queue=task_queue)
            print("activity result:", client.get_activity_result(started["activity_id"], timeout=30))
            started = client.start_activity("quickstart.count_words", "one two three", task_queue=task_queue)
            print("activity result:", client.get_activity_result(started["activity_id"], timeout=30))
            handle = client.start_workflow("quickstart.welcome", "Ada", task_queue=task_queue)
            print("workflow result:", handle.result(timeout=30))
            status = worker.status()
            print(f"worker {status.worker_id}: state={status.state.value} ready={status.ready} live={status.live}")
        finally:
            stop_started = time.monotonic()
            worker.stop()  # stop polling, drain, deregister
            runner.join(10)
            print(f"worker stopped in {time.monotonic() - stop_started:.2f}s: {worker.status().state.value}")
            client.close()


if __name__ == "__main__":
    main()

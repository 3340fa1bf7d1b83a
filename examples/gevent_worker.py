"""A gevent worker: hundreds of I/O-bound activities at once in one process.

Run it as a script (it patches first, then starts an embedded dev server, a gevent worker with
200 activity slots and 200 activities that each wait on I/O, and prints how long they took)::

    python examples/gevent_worker.py
    python examples/gevent_worker.py --activities 500 --server-url http://127.0.0.1:8080

Or serve the same activities with the command line, which patches before importing this file::

    sync-worker run -P gevent examples.gevent_worker:make_worker -Q io-work -c 200

See docs/gevent.md.
"""

# Patch before anything else is imported (requests, ssl, threading users, the app). When this
# module is imported by ``sync-worker run -P gevent`` the launcher has patched already.
if __name__ == "__main__":
    from gevent import monkey

    monkey.patch_all()

import argparse
import contextlib
import logging
import threading
import time
import uuid
from typing import Any, Iterator, List, Optional

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.worker import Worker


@activity.defn(name="gevent_example.wait_on_io")
def wait_on_io(seconds: float) -> str:
    ctx = activity.context()
    ctx.heartbeat_sync({"stage": "waiting"})  # works from the activity's greenlet
    time.sleep(seconds)  # patched: yields to the hub, the other activities keep running
    return f"{ctx.info.activity_type} waited {seconds} s"


def make_worker(client: Any, task_queue: str = "io-work", concurrency: int = 200) -> Worker:
    """Factory for ``sync-worker run``: the pool follows the process (gevent once patched)."""
    return Worker(client, task_queue=task_queue, activities=[wait_on_io], poll_timeout=5.0,
                  max_concurrent_activity_tasks=concurrency)


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
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--server-url", default=None, help="use this server instead of an embedded one")
    parser.add_argument("--activities", type=int, default=200, help="how many activities to run at once")
    parser.add_argument("--seconds", type=float, default=1.0, help="I/O wait of each activity")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    with server_url(args.server_url) as url:
        client = Client(url, max_connections=args.activities + 8)  # one pooled connection per slot
        task_queue = f"gevent-example-{uuid.uuid4().hex[:8]}"
        worker = make_worker(client, task_queue, args.activities)
        print(f"worker pool: {worker.backend.name}")
        runner = threading.Thread(target=worker.run, name="gevent-example-worker", daemon=True)  # a greenlet
        runner.start()
        try:
            started = time.monotonic()
            receipts = [client.start_activity("gevent_example.wait_on_io", args.seconds, task_queue=task_queue)
                        for _ in range(args.activities)]
            results = [client.get_activity_result(r["activity_id"], timeout=120) for r in receipts]
            elapsed = time.monotonic() - started
            print(f"{len(results)} activities of {args.seconds} s each finished in {elapsed:.2f} s")
            status = worker.status()
            print(f"worker {status.worker_id}: state={status.state.value} ready={status.ready} live={status.live}")
        finally:
            worker.stop()  # stop polling, drain, deregister
            runner.join(10)
            print(f"worker {worker.status().state.value}")
            client.close()


if __name__ == "__main__":
    main()

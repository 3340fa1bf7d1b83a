"""Worker sessions: a file downloaded, processed and uploaded on the same worker.

    python examples/worker_session.py                   # starts a dev server in this process
    python examples/worker_session.py --server-url URL  # or use a running server

Two workers poll one task queue. Each run pins its three steps to a worker session, so the
file the first step writes to the worker's scratch directory is there for the next two, while
different runs are spread over both workers. Without the session the steps would land on
either worker and the second step would not find the file. See docs/sessions.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
import threading
from typing import Any, Dict, Iterator, List, Optional

from sync_worker import ActivityFailed, Client, Worker, WorkerSessionOptions, activity, workflow

QUEUE = "sessions-example"
SCRATCH: Dict[str, str] = {}  # worker id -> its own scratch directory (its "local disk")


def _scratch() -> str:
    return SCRATCH[activity.context().info.worker_id]


@activity.defn(name="files.download")
def download(name: str) -> str:
    path = os.path.join(_scratch(), name)
    with open(path, "w") as handle:
        handle.write(f"contents of {name}\n" * 3)
    return path


@activity.defn(name="files.compress")
def compress(path: str) -> str:
    with open(path) as source:  # only the worker that downloaded it has the file
        lines = source.readlines()
    out = path + ".gz"
    with open(out, "w") as target:
        target.write(f"{len(lines)} lines, compressed\n")
    return out


@activity.defn(name="files.upload")
def upload(path: str) -> Dict[str, Any]:
    with open(path) as source:
        return {"uploaded": os.path.basename(path), "by": activity.context().info.worker_id,
                "summary": source.read().strip()}


@workflow.defn(name="files.process")
class ProcessFile:
    def run(self, ctx: Any, name: str) -> Any:
        session = WorkerSessionOptions(session_id=f"process-{name}", lease_seconds=60)
        try:
            path = yield ctx.schedule_activity("files.download", [name], worker_session=session)
            packed = yield ctx.schedule_activity("files.compress", [path], worker_session=session)
            return (yield ctx.schedule_activity("files.upload", [packed], worker_session=session))
        except ActivityFailed as error:
            if error.exception_type != "WorkerSessionLost":
                raise
            return {"uploaded": None, "lost_session": error.code}


@contextlib.contextmanager
def server_url(given: Optional[str]) -> Iterator[str]:
    if given:
        yield given
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        yield server.url


def main(argv: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--server-url", default=None)
    parser.add_argument("--files", type=int, default=4)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    with server_url(args.server_url) as url, tempfile.TemporaryDirectory() as root:
        client = Client(url)
        workers = []
        for name in ("alpha", "beta"):
            worker = Worker(client, task_queue=QUEUE, worker_id=f"{name}-{os.getpid()}", workflows=[ProcessFile],
                            activities=[download, compress, upload], poll_timeout=5, shutdown_timeout=10)
            SCRATCH[worker.worker_id] = os.path.join(root, name)
            os.makedirs(SCRATCH[worker.worker_id])
            workers.append(worker)
        threads = [threading.Thread(target=w.run, name=f"worker-{w.worker_id}") for w in workers]
        for thread in threads:
            thread.start()
        try:
            handles = [client.start_workflow("files.process", f"report-{i}.csv", task_queue=QUEUE)
                       for i in range(args.files)]
            results: List[Dict[str, Any]] = [h.result(timeout=60) for h in handles]
        finally:
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(30)
        for result in results:
            print(f"{result['uploaded']}: {result['summary']} (all three steps on {result['by']})")
        return results


if __name__ == "__main__":
    main()

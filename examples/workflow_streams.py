"""Workflow streams: a run reports its progress as it goes, a client follows it.

    python examples/workflow_streams.py                                   # embedded dev server
    python examples/workflow_streams.py --server-url http://127.0.0.1:8080

The workflow appends a progress item before and after each step to its ``progress`` stream and
closes it at the end; the client reads the stream with ``iter_workflow_stream`` (a long poll) while
the run is still going. Only the import line differs from the same workflow written for
``durable_workflow``.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from typing import Any, Iterator, List, Optional

from sync_worker import activity, workflow


@activity.defn(name="reports.step")
def step(name: str) -> str:
    time.sleep(0.2)  # some real work
    return f"{name} ok"


@workflow.defn(name="reports.build")
class BuildReport:
    def run(self, ctx: Any, steps: List[str]) -> Any:
        item = workflow.WorkflowStreamAppendItem
        done = []
        for name in steps:
            yield ctx.append_workflow_stream("progress", [item(payload={"step": name, "state": "started"})])
            done.append((yield ctx.schedule_activity("reports.step", [name], start_to_close_timeout=30)))
        yield ctx.append_workflow_stream("progress", [item(payload={"state": "finished"}, item_type="summary")])
        yield ctx.close_workflow_stream("progress")
        return done


@contextlib.contextmanager
def _server(url: Optional[str]) -> Iterator[str]:
    if url:
        yield url
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        yield server.url


def main(argv: Optional[List[str]] = None) -> Any:
    from sync_worker.client import Client
    from sync_worker.errors import ServerError
    from sync_worker.worker import Worker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default=None, help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    with _server(args.server_url) as url:
        client = Client(url)
        queue = f"reports-{uuid.uuid4().hex[:8]}"
        worker = Worker(client, task_queue=queue, workflows=[BuildReport], activities=[step], poll_timeout=5.0)
        runner = threading.Thread(target=worker.run, name="reports-worker", daemon=True)
        runner.start()
        try:
            handle = client.start_workflow("reports.build", ["fetch", "render"], task_queue=queue)
            run_id = client.describe_workflow(handle.workflow_id).run_id or ""
            while True:  # the stream opens with the run's first append
                try:
                    client.describe_workflow_stream(handle.workflow_id, run_id, "progress")
                    break
                except ServerError:  # 404 stream_not_found until then
                    time.sleep(0.1)
            seen = []
            for item in client.iter_workflow_stream(handle.workflow_id, run_id, "progress", wait_seconds=10):
                print("progress:", item.offset, item.payload)
                seen.append(item.payload)
            print("result:", handle.result(timeout=30))
            return seen
        finally:
            worker.stop()
            runner.join(10)
            client.close()


if __name__ == "__main__":
    main()

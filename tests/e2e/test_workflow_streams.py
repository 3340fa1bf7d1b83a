"""Workflow streams on the real worker against the real dev server (threads; again under gevent).

A reader follows a run's output stream with ``iter_workflow_stream`` (a long poll) while the run
writes it: the first item is there at once, the reader then blocks in the long poll until a
signal lets the run append the second item and close the stream, and the iteration ends at the
close with every item once, in order.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, List

from sync_worker import workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.errors import ServerError
from tests.e2e._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@workflow.defn(name="e2e.streams.progress")
class Progress:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal("more")
    def more(self) -> None:
        self.go = True

    def run(self, ctx: Any) -> Any:
        yield ctx.append_workflow_stream("progress", [workflow.WorkflowStreamAppendItem(payload="started")])
        yield ctx.wait_condition(lambda: self.go)
        yield ctx.append_workflow_stream("progress", [workflow.WorkflowStreamAppendItem(payload="finished")])
        yield ctx.close_workflow_stream("progress")
        return "ok"


def _exists(client: Client, workflow_id: str, run_id: str) -> bool:
    try:
        return client.describe_workflow_stream(workflow_id, run_id, "progress").total_items >= 1
    except ServerError:
        return False


def test_a_reader_follows_the_stream_while_the_run_writes_it(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("streams")
    worker = make_worker(client, task_queue=queue, workflows=[Progress], poll_timeout=2.0, shutdown_timeout=10.0)
    try:
        with RunningWorker(worker) as running:
            handle = client.start_workflow("e2e.streams.progress", task_queue=queue)
            run_id = client.describe_workflow(handle.workflow_id).run_id or ""
            wait_for(lambda: _exists(client, handle.workflow_id, run_id))
            seen: List[Any] = []
            reader_client = Client(dev_server.url)
            reader = threading.Thread(target=lambda: seen.extend(
                (item.offset, item.payload)
                for item in reader_client.iter_workflow_stream(handle.workflow_id, run_id, "progress",
                                                               wait_seconds=10)))
            reader.start()
            wait_for(lambda: seen == [(0, "started")])
            assert reader.is_alive()  # parked in the long poll: nothing more was written
            client.signal_workflow(handle.workflow_id, "more")
            reader.join(20)
            reader_client.close()
            assert not reader.is_alive() and seen == [(0, "started"), (1, "finished")]
            assert client.get_result(handle.workflow_id, timeout=20, poll_interval=0.1) == "ok"
            assert running.stop() is None
    finally:
        client.close()


def test_the_example_runs() -> None:
    """``examples/workflow_streams.py`` end to end on its embedded dev server."""
    path = Path(__file__).resolve().parents[2] / "examples" / "workflow_streams.py"
    spec = importlib.util.spec_from_file_location("example_workflow_streams", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([]) == [{"step": "fetch", "state": "started"}, {"step": "render", "state": "started"},
                               {"state": "finished"}]

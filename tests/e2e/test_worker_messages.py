"""Updates and early signals end to end: our Client, our Worker, the dev server."""

from __future__ import annotations

import uuid
from typing import Any, Iterator, List

import pytest

from sync_worker import errors, workflow
from sync_worker.client import Client
from sync_worker.worker import Worker

from ._worker_support import RunningWorker, unique_queue, wait_for


@workflow.defn(name="e2e.msg.cart")
class Cart:
    """Items arrive by update (validated in the handler) or signal; ``checkout`` ends the run."""

    def __init__(self) -> None:
        self.items: List[str] = []
        self.closed = False

    @workflow.update("add_item")
    def add_item(self, item: str) -> int:
        if not item:
            raise ValueError("an item needs a name")
        self.items.append(item)
        return len(self.items)

    @workflow.signal("add")
    def add(self, item: str) -> None:
        self.items.append(item)

    @workflow.signal("checkout")
    def checkout(self) -> None:
        self.closed = True

    @workflow.query("items")
    def current_items(self) -> List[str]:
        return list(self.items)

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: self.closed)
        return self.items


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def test_updates_return_results_and_failures_leave_the_run_open(client: Client) -> None:
    queue = unique_queue("msg")
    worker = Worker(client, task_queue=queue, workflows=[Cart], poll_timeout=2.0)
    with RunningWorker(worker):
        handle = client.start_workflow("e2e.msg.cart", task_queue=queue, workflow_id=f"cart-{uuid.uuid4().hex}")
        wait_for(lambda: client.query_workflow(handle.workflow_id, "items")["result"] == [], timeout=15)
        assert handle.update("add_item", ["tea"], wait_for="completed")["result"] == 1
        assert handle.update("add_item", ["scone"], wait_for="completed")["result"] == 2
        with pytest.raises(errors.UpdateFailed) as caught:
            handle.update("add_item", [""], wait_for="completed")
        assert caught.value.status == 422
        assert isinstance(caught.value.body, dict) and caught.value.body["exception_type"] == "ValueError"
        assert "an item needs a name" in str(caught.value)
        assert client.describe_workflow(handle.workflow_id).status not in ("failed", "completed")
        assert client.query_workflow(handle.workflow_id, "items")["result"] == ["tea", "scone"]
        handle.signal("checkout")
        assert handle.result(timeout=15) == ["tea", "scone"]


def test_signals_sent_before_the_first_task_are_all_applied(client: Client) -> None:
    queue = unique_queue("msg")
    handle = client.start_workflow("e2e.msg.cart", task_queue=queue, workflow_id=f"early-{uuid.uuid4().hex}")
    handle.signal("add", ["early-1"])  # no worker yet: both signals land before the first workflow task
    handle.signal("add", ["early-2"])
    worker = Worker(client, task_queue=queue, workflows=[Cart], poll_timeout=2.0)
    with RunningWorker(worker):
        wait_for(lambda: client.query_workflow(handle.workflow_id, "items")["result"] == ["early-1", "early-2"],
                 timeout=15)
        handle.signal("add", ["late"])
        wait_for(lambda: len(client.query_workflow(handle.workflow_id, "items")["result"]) == 3, timeout=15)
        handle.signal("checkout")
        assert handle.result(timeout=15) == ["early-1", "early-2", "late"]

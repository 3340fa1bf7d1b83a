"""A workflow calls a Celery task as an activity, with keyword arguments in the documented
envelope: from a ``sync_worker`` workflow, and from the published SDK's own (asyncio) worker."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sync_worker import Worker, workflow
from tests._sdk_missing import SDK_MISSING

from ._support import pool

pytestmark = pytest.mark.usefixtures("sample_worker")


@workflow.defn(name="celery.interop.greeter")
class Greeter:
    def run(self, ctx: Any, name: str) -> Any:
        plain = yield ctx.schedule_activity("proj.tasks.greet", [name], queue="proj-default")
        keyword = yield ctx.schedule_activity("proj.tasks.greet", [name, {"__kwargs__": {"greeting": "hola"}}],
                                              queue="proj-default")
        return [plain, keyword]


def test_a_sync_worker_workflow_calls_a_celery_task_with_kwargs(sample_app) -> None:
    from sync_worker_celery.worker import WorkerGroup

    queue = f"wf-{uuid.uuid4().hex[:8]}"
    group = WorkerGroup(sample_app, [Worker(sample_app.client, task_queue=queue, workflows=[Greeter], pool=pool())])
    group.start()
    try:
        assert group.wait_ready(30)
        handle = sample_app.client.start_workflow("celery.interop.greeter", "wf", task_queue=queue)
        assert handle.result(timeout=30) == ["hello, wf!", "hola, wf!"]
    finally:
        group.stop()
        group.join(30)


def test_the_published_sdk_workflow_calls_a_celery_task_with_kwargs(sample_app, celery_server) -> None:
    sdk = pytest.importorskip("durable_workflow", reason=SDK_MISSING)
    from tests.interop._sdk import run, with_worker

    @sdk.workflow.defn(name="celery.interop.sdk_greeter")
    class SdkGreeter:
        def run(self, ctx: Any, name: str) -> Any:
            result = yield ctx.schedule_activity("proj.tasks.greet",
                                                 [name, {"__kwargs__": {"greeting": "ciao", "punctuation": "?"}}],
                                                 queue="proj-default")
            return result

    queue = f"sdk-{uuid.uuid4().hex[:8]}"

    async def body(client: Any, worker: Any) -> Any:
        handle = await client.start_workflow(workflow_type="celery.interop.sdk_greeter", task_queue=queue,
                                             workflow_id=f"sdk-greeter-{queue}", input=["sdk"])
        return await client.get_result(handle, timeout=30)

    assert run(with_worker(celery_server.url, queue, body, workflows=[SdkGreeter])) == "ciao, sdk?"

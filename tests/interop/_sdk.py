"""Helpers for driving the published ``durable_workflow`` SDK (asyncio) from synchronous tests."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable, Optional, TypeVar

from durable_workflow import Client, Worker

T = TypeVar("T")


async def with_worker(url: str, task_queue: str, body: Callable[[Client, Worker], Awaitable[T]], *,
                      workflows: Iterable[type] = (), activities: Iterable[Callable[..., Any]] = (),
                      namespace: str = "default", token: Optional[str] = None) -> T:
    """Run ``worker.run()`` in the background while ``body`` drives the client, then stop it."""
    client = Client(url, token=token, namespace=namespace)
    worker = Worker(client, task_queue=task_queue, workflows=list(workflows), activities=list(activities),
                    poll_timeout=2.0, shutdown_timeout=10.0)
    runner = asyncio.create_task(worker.run())
    try:
        return await body(client, worker)
    finally:
        await worker.stop()
        await asyncio.wait_for(runner, timeout=15)
        await client.aclose() if hasattr(client, "aclose") else None


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]

"""One SDK-authored workflow module, run on the published SDK's worker and on ours (import swapped).

Each authoring-API interop test (``test_authoring_*.py``) drives the same scenario twice against
one dev server: once with the published SDK's ``Worker`` serving the module as written, once with
sync_worker's ``Worker`` serving the import-swapped copy. The scenario itself talks to the server
through sync_worker's synchronous ``Client`` in both runs (the worker is what is compared), and
returns what it observed plus the run's history. ``shape`` projects a history to what must match
between the two workers: event types in order and the fields the feature defines, with ids and
times left out.
"""

from __future__ import annotations

import asyncio
import threading
import types
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar

from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from tests._import_swap import load_with_sync_worker_imports
from tests.e2e._worker_support import RunningWorker, wait_for

T = TypeVar("T")


class SdkWorkerThread:
    """The published SDK's asyncio ``Worker`` running on its own thread and event loop."""

    def __init__(self, url: str, task_queue: str, workflows: Iterable[type], activities: Iterable[Any],
                 **options: Any) -> None:
        self.url, self.task_queue = url, task_queue
        self.workflows, self.activities, self.options = list(workflows), list(activities), options
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.worker: Any = None
        self.errors: List[BaseException] = []
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="sdk-worker", daemon=True)

    def _main(self) -> None:
        from durable_workflow import Client as SdkClient
        from durable_workflow import Worker as SdkWorker

        async def main() -> None:
            client = SdkClient(self.url)
            self.worker = SdkWorker(client, task_queue=self.task_queue, workflows=self.workflows,
                                    activities=self.activities, poll_timeout=2.0, shutdown_timeout=10.0,
                                    **self.options)
            self.loop = asyncio.get_running_loop()
            runner = asyncio.ensure_future(self.worker.run())
            self._ready.set()
            try:
                await runner
            finally:
                close = getattr(client, "aclose", None)
                if close is not None:
                    await close()

        try:
            asyncio.run(main())
        except BaseException as error:  # surfaced by __exit__
            self.errors.append(error)
        finally:
            self._ready.set()

    def __enter__(self) -> SdkWorkerThread:
        self.thread.start()
        assert self._ready.wait(15), "the SDK worker did not start"
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.loop is not None and self.worker is not None and self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.worker.stop(), self.loop).result(20)
        self.thread.join(20)


def registered(client: Client, task_queue: str) -> bool:
    return bool(client.list_workers(task_queue=task_queue).workers)


def run_on_sdk(server: DevServer, module: types.ModuleType, scenario: Callable[[Client, str], T],
               **options: Any) -> T:
    queue = f"authoring-sdk-{uuid.uuid4().hex[:8]}"
    client = Client(server.url)
    try:
        with SdkWorkerThread(server.url, queue, module.WORKFLOWS, module.ACTIVITIES, **options) as sdk:
            wait_for(lambda: registered(client, queue) or sdk.errors, timeout=20)
            assert not sdk.errors, sdk.errors
            return scenario(client, queue)
    finally:
        client.close()


def run_on_ours(server: DevServer, module: types.ModuleType, scenario: Callable[[Client, str], T],
                **options: Any) -> T:
    queue = f"authoring-sw-{uuid.uuid4().hex[:8]}"
    client = Client(server.url)
    worker = Worker(client, task_queue=queue, workflows=module.WORKFLOWS, activities=module.ACTIVITIES,
                    poll_timeout=2.0, shutdown_timeout=10.0, **options)
    try:
        with RunningWorker(worker) as running:
            out = scenario(client, queue)
            assert running.stop() is None
            return out
    finally:
        client.close()


def swapped(module: types.ModuleType) -> types.ModuleType:
    return load_with_sync_worker_imports(module)


def history(client: Client, workflow_id: str, run_id: Optional[str] = None) -> List[Dict[str, Any]]:
    run = run_id or client.describe_workflow(workflow_id).run_id or ""
    return list(client.iter_history(workflow_id, run))


def shape(events: Sequence[Dict[str, Any]], fields: Dict[str, Tuple[str, ...]]) -> List[Tuple[Any, ...]]:
    """``(event_type, field values...)`` per event; ``fields[event_type]`` names what to keep."""
    out: List[Tuple[Any, ...]] = []
    for event in events:
        kind = str(event.get("event_type"))
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        assert isinstance(payload, dict)
        out.append((kind, *(_freeze(payload.get(name)) for name in fields.get(kind, ()))))
    return out


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((key, _freeze(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value

"""External payload storage between the published SDK 2.12 and sync_worker (issue 24).

Both sides point their local-filesystem driver at one directory. Either side writes a
reference the other reads: the SDK's client starts a run with a 1 MiB argument that our
worker runs (its activity result and the run's result stored by us), and the SDK reads our
result; our client starts a run that the SDK's worker runs, and we read the SDK's references.
The dev server in between keeps references only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from durable_workflow import Client as SdkClient
from durable_workflow import LocalFilesystemExternalStorage as SdkLocalStorage
from durable_workflow import Worker as SdkWorker
from durable_workflow import activity as sdk_activity
from durable_workflow import workflow as sdk_workflow

from sync_worker import LocalFilesystemExternalStorage
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from tests.interop._ext_worker_app import OurFlow, shout
from tests.interop._sdk import run

THRESHOLD = 32 * 1024
REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def _text(seed: str) -> str:
    return (seed * (MIB // len(seed) + 1))[:MIB]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@sdk_activity.defn(name="interop.ext.shout")
def sdk_shout(text: str) -> str:
    return text.upper()


@sdk_workflow.defn(name="interop.ext.flow")
class SdkFlow:
    def run(self, ctx: Any, text: str) -> Any:
        loud = yield ctx.schedule_activity("interop.ext.shout", [text])
        return {"arg": hashlib.sha256(text.encode()).hexdigest(), "loud": loud}


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30) as dev:
        yield dev


def _stored_objects(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file() and not p.name.startswith(".tmp"))


@contextlib.contextmanager
def _our_worker(pool: str, url: str, root: Path, queue: str, log: Path) -> Iterator[None]:
    """Our worker on threads (in this process) or on gevent (``sync-worker run -P gevent``, patched first)."""
    if pool == "threads":
        ours = Client(url, external_storage=LocalFilesystemExternalStorage(root),
                      external_storage_threshold_bytes=THRESHOLD)
        worker = Worker(ours, task_queue=queue, workflows=[OurFlow], activities=[shout], poll_timeout=2.0,
                        pool="threads")
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            yield
        finally:
            worker.stop()
            thread.join(30)
            ours.close()
        return
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=url, SYNC_WORKER_EXTERNAL_STORAGE=root.as_uri(),
               SYNC_WORKER_EXTERNAL_STORAGE_THRESHOLD_BYTES=str(THRESHOLD), PYTHONPATH=str(REPO))
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sync_worker", "run", "-P", "gevent", "-Q", queue,
                                 "tests.interop._ext_worker_app:build"], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        try:
            yield
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    assert "pool gevent" in log.read_text(), log.read_text()[-2000:]


@pytest.mark.parametrize("pool", ["threads", "gevent"])
def test_the_sdk_writes_and_sync_worker_reads_then_the_sdk_reads_ours(server: DevServer, tmp_path: Path,
                                                                       pool: str) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    queue = f"ext-sdk-to-us-{uuid.uuid4().hex[:6]}"
    text = _text("sdk-wrote-this ")
    with _our_worker(pool, server.url, root, queue, tmp_path / "worker.log"):
        async def body() -> Any:
            sdk = SdkClient(server.url, external_storage=SdkLocalStorage(root),
                            external_storage_threshold_bytes=THRESHOLD)
            handle = await sdk.start_workflow(workflow_type="interop.ext.flow", task_queue=queue,
                                              workflow_id=f"wf-{uuid.uuid4().hex[:8]}", input=[text])
            return handle, await sdk.get_result(handle, timeout=90)

        handle, result = run(body())
    assert result == {"arg": _digest(text), "loud": text.upper()}
    # start argument (SDK), activity argument + result and run result (ours): all stored, none inline
    assert _stored_objects(root) >= 3
    _assert_history_holds_references(server, handle.workflow_id)


def test_sync_worker_writes_and_the_sdk_worker_reads(server: DevServer, tmp_path: Path) -> None:
    root = tmp_path / "shared"
    queue = f"ext-us-to-sdk-{uuid.uuid4().hex[:6]}"
    ours = Client(server.url, external_storage=LocalFilesystemExternalStorage(root),
                  external_storage_threshold_bytes=THRESHOLD)
    text = _text("sync-worker-wrote-this ")
    handle = ours.start_workflow("interop.ext.flow", text, task_queue=queue)

    async def sdk_worker() -> None:
        sdk = SdkClient(server.url)
        worker = SdkWorker(sdk, task_queue=queue, workflows=[SdkFlow], activities=[sdk_shout], poll_timeout=2.0,
                           shutdown_timeout=10.0, external_storage=SdkLocalStorage(root),
                           external_storage_threshold_bytes=THRESHOLD)
        runner = asyncio.create_task(worker.run())
        try:
            for _ in range(180):
                description = ours.describe_workflow(handle.workflow_id)
                if description.status in ("completed", "failed"):
                    break
                await asyncio.sleep(0.5)
        finally:
            await worker.stop()
            await asyncio.wait_for(runner, timeout=15)

    try:
        run(sdk_worker())
        assert handle.result(timeout=30) == {"arg": _digest(text), "loud": text.upper()}
    finally:
        ours.close()
    _assert_history_holds_references(server, handle.workflow_id)


def _assert_history_holds_references(server: DevServer, workflow_id: str) -> None:
    raw = Client(server.url)
    try:
        run_id = raw.request("GET", f"/workflows/{workflow_id}")["run_id"]
        events = list(raw.iter_history(workflow_id, run_id))
    finally:
        raw.close()
    text = repr(events)
    assert "external_storage" in text and len(text) < 256 * 1024, len(text)

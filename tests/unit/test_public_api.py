"""The public surface: ``__all__`` is pinned, every name resolves, and importing is light."""

from __future__ import annotations

import subprocess
import sys

import sync_worker
from sync_worker._sdk_names import SDK_NAMES

EXPECTED = {
    "ActivityCancelled", "ActivityFailed", "ActivityLeaseAuthorityLost", "CancelToken",
    "ChildWorkflowCancelled", "ChildWorkflowFailed", "ChildWorkflowTerminated", "Client",
    "DurableWorkflowError", "FailureReportTooLarge", "FatalError", "InMemoryMetrics",
    "NonDeterministicReplayError", "NonRetryableError", "PayloadError", "QueryFailed", "ServerError",
    "SignalFailed", "TransportError", "Unauthorized", "Worker", "WorkerRoleStatus", "WorkerState",
    "WorkerStatus", "WorkflowAlreadyStarted", "WorkflowCancelled", "WorkflowExecution", "WorkflowFailed",
    "WorkflowHandle", "WorkflowNotFound", "WorkflowTerminated", "WorkflowTimedOut", "__version__",
    "activity", "errors", "payloads", "workflow",
    "WorkerInterceptor", "PassthroughWorkerInterceptor", "ActivityInterceptorContext",
    "ResponseTooLarge", "ResultNotEncodable",
} | (set(SDK_NAMES) - {"client", "external_storage", "interceptors", "testing",
                        "worker", "worker_session"})  # the SDK's names (tests/interop)


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert set(sync_worker.__all__) == EXPECTED
    for name in sync_worker.__all__:
        assert getattr(sync_worker, name) is not None, name


def test_fatal_error_is_the_non_retryable_error() -> None:
    assert sync_worker.FatalError is sync_worker.NonRetryableError


def test_import_is_light_so_gevent_can_patch_first() -> None:
    code = (
        "import sys, sync_worker\n"
        "heavy = [m for m in ('requests', 'urllib3', 'ssl', 'asyncio', 'sync_worker.client') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_no_asyncio_anywhere_in_the_package() -> None:
    import pathlib
    import re

    root = pathlib.Path(sync_worker.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if re.search(r"^\s*(import asyncio|from asyncio\b)", path.read_text(encoding="utf-8"), re.M)
    ]
    assert offenders == []


def test_launcher_reads_pool_from_argv_then_env() -> None:
    from sync_worker._launcher import requested_pool

    assert requested_pool(["run", "-P", "gevent", "app:w"], {}) == "gevent"
    assert requested_pool(["run", "--pool=threads"], {"SYNC_WORKER_POOL": "gevent"}) == "threads"
    assert requested_pool(["run", "-Pgevent"], {}) == "gevent"
    assert requested_pool(["run", "app:w"], {"SYNC_WORKER_POOL": "gevent"}) == "gevent"
    assert requested_pool(["run", "app:w"], {}) is None

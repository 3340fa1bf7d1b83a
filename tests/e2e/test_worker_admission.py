"""Activity slots behind the memory admission gate, end to end: real dev server, real sockets.

Runs on threads, and again under gevent (tests/gevent_suite.py). The real memory readers of
this machine are used; the gate's "first task runs alone" rule makes it defer on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterator

import pytest

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.runtime.metrics import ADMISSION_DEFERRALS, CONCURRENCY_LIMIT, MEMORY_USAGE
from sync_worker.worker import InMemoryMetrics, WorkerState

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

RELEASE = threading.Event()


@activity.defn(name="adm.block")
def block() -> str:
    RELEASE.wait(30)
    return activity.context().info.worker_id


@activity.defn(name="adm.who")
def who() -> str:
    return activity.context().info.worker_id


@activity.defn(name="adm.allocate")
def allocate(megabytes: int) -> int:
    data = bytearray(megabytes * 1024 * 1024)
    for offset in range(0, len(data), 4096):
        data[offset] = 1
    return len(data)


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:", heartbeat_interval_seconds=1) as dev:
        yield dev


@pytest.fixture
def client(server: DevServer) -> Iterator[Client]:
    c = Client(server.url)
    try:
        yield c
    finally:
        c.close()


def _status(client: Client, activity_id: str) -> str:
    return str(client.describe_activity(activity_id).get("activity_status"))


def test_a_deferring_worker_leases_nothing_another_replica_runs_it_and_drain_is_not_blocked(
        client: Client) -> None:
    RELEASE.clear()
    queue = unique_queue("adm")
    metrics = InMemoryMetrics()
    gated = make_worker(client, task_queue=queue, activities=[block, who], poll_timeout=2.0, metrics=metrics,
                        max_concurrent_activity_tasks={"start": 2, "max": 2}, shutdown_timeout=10.0)
    with RunningWorker(gated) as running_gated:
        first = client.start_activity("adm.block", task_queue=queue)["activity_id"]
        wait_for(lambda: _status(client, first) == "running")
        # The first task of the process runs alone: the poller waits at the gate, before the poll.
        wait_for(lambda: (gated.status().concurrency.waiting == 1), timeout=5)  # type: ignore[union-attr]
        status = gated.status().concurrency
        assert status is not None and status.mode == "adaptive" and status.in_flight == 1
        assert status.deferrals >= 1 and status.limit == 2
        second = client.start_activity("adm.who", task_queue=queue)["activity_id"]
        time.sleep(1.5)
        assert _status(client, second) != "running"  # not leased by the deferring worker
        other = make_worker(client, task_queue=queue, activities=[who], poll_timeout=2.0,
                            max_concurrent_activity_tasks=1)
        with RunningWorker(other) as running_other:
            assert client.get_activity_result(second, timeout=10) == other.worker_id
            assert running_other.stop() is None
        # Shutdown while the poller defers: it is cancelled at once; the running task drains.
        started = time.monotonic()
        stopper = threading.Thread(target=running_gated.stop)
        stopper.start()
        wait_for(lambda: gated.state is WorkerState.DRAINING, timeout=5)
        RELEASE.set()
        stopper.join(15)
        assert not stopper.is_alive() and time.monotonic() - started < 8
        assert gated.state is WorkerState.STOPPED and not running_gated.errors
    assert client.get_activity_result(first, timeout=10) == gated.worker_id
    final = gated.status().concurrency
    assert final is not None and "adm.block" in final.step_cost_bytes  # it ran alone: its cost is known
    assert metrics.counter(ADMISSION_DEFERRALS, task_queue=queue) >= 1


def test_adaptive_worker_reports_concurrency_in_status_heartbeat_and_metrics(client: Client) -> None:
    queue = unique_queue("adm")
    metrics = InMemoryMetrics()
    worker = make_worker(client, task_queue=queue, activities=[allocate], poll_timeout=2.0, metrics=metrics,
                         max_concurrent_activity_tasks={"max": 4, "tickMs": 200})
    with RunningWorker(worker) as running:
        ids = [client.start_activity("adm.allocate", 20, task_queue=queue)["activity_id"] for _ in range(6)]
        assert [client.get_activity_result(i, timeout=20) for i in ids] == [20 * 1024 * 1024] * 6
        status = worker.status().concurrency
        assert status is not None
        assert status.mode == "adaptive" and (status.min, status.max) == (1, 4)
        assert status.memory_source in {"cgroup_v2_working_set", "cgroup_v2_current", "cgroup_v1_working_set",
                                        "cgroup_v1_usage", "proc_vmrss", "rusage_maxrss_peak"}
        assert status.usage_bytes and status.ceiling_bytes and status.usage_pct is not None
        assert status.gate in ("open", "deferring") and status.step_cost_bytes.get("adm.allocate", -1) >= 0
        wire = status.to_wire()
        assert wire["concurrency"]["mode"] == "adaptive" and wire["memory"]["source"] == status.memory_source

        def row() -> Dict[str, Any]:
            rows = client.list_workers(task_queue=queue)["workers"]
            return rows[0] if rows and rows[0].get("last_heartbeat_at") else {}

        beat = wait_for(row, timeout=5)
        assert beat["max_concurrent_activity_tasks"] == 4  # the adaptive max: the most it may run
        assert isinstance(beat["process_metrics"]["memory_bytes"], int)
        assert beat["process_metrics"]["memory_bytes"] > 0
        assert 0 <= beat["task_slots"]["activity_available"] <= 4
        wait_for(lambda: metrics.gauge_value(CONCURRENCY_LIMIT, task_queue=queue) is not None, timeout=5)
        assert (metrics.gauge_value(MEMORY_USAGE, task_queue=queue) or 0) > 0
        assert running.stop() is None


def test_fixed_worker_is_not_gated_but_publishes_memory_figures(client: Client) -> None:
    queue = unique_queue("adm")
    worker = make_worker(client, task_queue=queue, activities=[who], poll_timeout=2.0,
                         max_concurrent_activity_tasks=3)
    with RunningWorker(worker) as running:
        ids = [client.start_activity("adm.who", task_queue=queue)["activity_id"] for _ in range(3)]
        assert {client.get_activity_result(i, timeout=10) for i in ids} == {worker.worker_id}
        status = worker.status().concurrency
        assert status is not None and status.mode == "fixed" and status.gate == "off" and status.limit == 3
        assert status.deferrals == 0 and status.usage_bytes
        # Idle again: the poller holds a slot for its long poll, which is not work, so the control
        # loop ticks at its quiet interval (30 s) instead of every tickMs.
        def polling_idle() -> bool:
            figures = worker.status().concurrency
            return figures is not None and figures.reserved == 1 and figures.in_flight == 0

        wait_for(polling_idle, timeout=5)
        assert worker.activity_gate.idle()
        assert running.stop() is None


def test_adaptive_concurrency_example_runs() -> None:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, os.path.join(repo, "examples", "adaptive_concurrency.py")],
                            cwd=repo, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=repo))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done 12/12" in result.stdout and "learned costs: {'reports.build':" in result.stdout
    assert result.stdout.rstrip().endswith("stopped")


def test_gate_figures_are_exported_to_prometheus(client: Client) -> None:
    from prometheus_client import CollectorRegistry

    from sync_worker.worker.prometheus import PrometheusMetrics

    registry = CollectorRegistry()
    queue = unique_queue("adm")
    worker = make_worker(client, task_queue=queue, activities=[block, who], poll_timeout=2.0,
                         metrics=PrometheusMetrics(registry),
                         max_concurrent_activity_tasks={"start": 3, "max": 3, "tickMs": 100})
    labels = {"task_kind": "activity", "task_queue": queue}
    RELEASE.clear()
    with RunningWorker(worker) as running:
        first = client.start_activity("adm.block", task_queue=queue)["activity_id"]
        wait_for(lambda: registry.get_sample_value("durable_workflow_worker_admission_deferrals_total", labels),
                 timeout=10)  # the first task runs alone: the poller waited for memory
        wait_for(lambda: registry.get_sample_value("durable_workflow_worker_concurrency_in_flight", labels) == 1,
                 timeout=10)
        # 3, or lower already: a blocked task with no completions is a stall tick (backpressure)
        assert registry.get_sample_value("durable_workflow_worker_concurrency_limit", labels) in (1.0, 2.0, 3.0)
        assert (registry.get_sample_value("durable_workflow_worker_memory_usage_bytes", labels) or 0) > 0
        assert (registry.get_sample_value("durable_workflow_worker_memory_limit_bytes", labels) or 0) > 0
        assert registry.get_sample_value("durable_workflow_worker_admission_waiting", labels) == 1
        assert registry.get_sample_value("durable_workflow_worker_admission_deferring", labels) in (0.0, 1.0)
        RELEASE.set()
        assert client.get_activity_result(first, timeout=10) == worker.worker_id
        assert running.stop() is None

"""Worker metrics exported through prometheus_client, against the dev server."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.worker import Worker
from sync_worker.worker.prometheus import PrometheusMetrics

from ._worker_support import RunningWorker, unique_queue


@activity.defn(name="e2e.prom.double")
def double(value: int) -> int:
    return value * 2


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else float(value)


def test_polls_and_tasks_are_exported_with_the_sdk_names(dev_server: Any) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("prom")
    registry = CollectorRegistry()
    worker = Worker(client, task_queue=queue, activities=[double], poll_timeout=1.0,
                    metrics=PrometheusMetrics(registry))
    with RunningWorker(worker):
        receipts = [client.start_activity("e2e.prom.double", n, task_queue=queue) for n in (1, 2, 3)]
        assert [client.get_activity_result(r["activity_id"], timeout=15) for r in receipts] == [2, 4, 6]
    labels = {"task_kind": "activity", "task_queue": queue}
    assert _sample(registry, "durable_workflow_worker_tasks_total", outcome="completed", **labels) == 3
    assert _sample(registry, "durable_workflow_worker_polls_total", outcome="task", **labels) == 3
    assert _sample(registry, "durable_workflow_worker_task_duration_seconds_count", outcome="completed",
                   **labels) == 3
    exposition = [line for line in generate_latest(registry).decode().splitlines()
                  if line.startswith("durable_workflow_worker_tasks_total{")]
    assert any(f'task_queue="{queue}"' in line and 'outcome="completed"' in line for line in exposition)

"""The real nestjs-durable engine (core 0.62.0, BullMQ transport 0.19.0) drives Python-authored workflows.

``engine.remote(name, {group: "py-workflows"})`` hands each turn to our ``WorkflowWorker`` served by
``sync-worker nestjs`` (one process serving the interop steps and workflows), on threads and under
gevent; the published asyncio ``durable-worker`` 0.26.1 ``WorkflowWorker`` is the control. Every
scenario runs against all three, each with its own engine and key prefix on the shared Redis, and
the last test compares what the engine recorded for ours against the control.
"""

from __future__ import annotations

import json
import uuid
from typing import Iterator

import pytest

from ._nestjs_harness import Fleet, missing, redis_url
from ._nestjs_workflow_scenarios import SCENARIOS
from ._nestjs_workflows import GROUP

pytestmark = [pytest.mark.timeout(300)]

KINDS = ("threads", "gevent", "control")

_reason = missing("redis")
if _reason:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    url = redis_url()
    assert url is not None
    fleet = Fleet("redis", url, tmp_path_factory.mktemp("nestjs-workflows"), workflows=True, tag="wf")
    yield fleet
    fleet.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_engine_drives_the_workflow(fleet: Fleet, kind: str, scenario: str) -> None:
    engine, worker = fleet.member(kind)
    fleet.records[(kind, scenario)] = SCENARIOS[scenario](engine, worker, fleet.workdir(kind, scenario))


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_step_progress_reaches_the_engine(fleet: Fleet, kind: str) -> None:
    """``ctx.progress`` in a step is relayed by the engine (built with ``controlPlane``) as it happens."""
    engine, worker = fleet.get(kind)
    run_id = f"progress-{uuid.uuid4().hex[:8]}"
    result = engine.run(run_id, "payments.progress", {"count": 3})
    assert result["status"] == "completed", (result, worker.log()[-2000:])
    events = engine.call("progress", runId=run_id)["events"]
    assert [e["event"]["message"] for e in events] == ["batch 1", "batch 2", "batch 3"], events
    assert all(e["seq"] == 0 and e["name"] == "payments.progress" for e in events)
    assert [e["event"]["data"] for e in events] == [{"done": 1}, {"done": 2}, {"done": 3}]
    # ... and the events ride the step's result onto its checkpoint too.
    assert [e["message"] for e in result["checkpoints"][0]["events"]] == ["batch 1", "batch 2", "batch 3"]


def test_the_control_relays_progress_the_same_way(fleet: Fleet) -> None:
    engine, worker = fleet.member("control")
    run_id = f"progress-{uuid.uuid4().hex[:8]}"
    result = engine.run(run_id, "payments.progress", {"count": 3})
    assert result["status"] == "completed", (result, worker.log()[-2000:])
    events = engine.call("progress", runId=run_id)["events"]
    assert [e["event"]["message"] for e in events] == ["batch 1", "batch 2", "batch 3"], events


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_the_workflow_group_is_announced_as_the_published_worker_does(fleet: Fleet, kind: str) -> None:
    import redis

    engine, worker = fleet.get(kind)
    seen = engine.call("workers", group=GROUP)
    assert GROUP in seen["groups"]
    assert worker.proc is not None
    ours = [d for d in seen["descriptors"] if d["instanceId"].endswith(f"-{worker.proc.pid}")]
    assert len(ours) == 1, seen
    descriptor = ours[0]
    assert "wf.mixed" in descriptor["workflows"] and descriptor["workflows"] == sorted(descriptor["workflows"])
    assert {"name": "wf.mixed", "group": GROUP} in descriptor["registrations"]
    assert "payments.charge-card" in descriptor["steps"]
    client = redis.Redis.from_url(fleet.url, decode_responses=True)
    try:
        beat = json.loads(client.get(f"{worker.prefix}-worker-heartbeat:{GROUP}:{descriptor['instanceId']}"))
        assert set(beat) >= {"ts", "descriptorHash"}
    finally:
        client.close()


def test_engine_records_match_the_control(fleet: Fleet) -> None:
    fleet.assert_matches_control(SCENARIOS)

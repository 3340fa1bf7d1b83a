"""beat_schedule → server-side schedules on the dev server (which advertises them), and the
refusal when a server does not."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from sync_worker_celery.beat import install_beat_schedule, schedules_unavailable_reason
from sync_worker_celery.exceptions import UnsupportedFeature
from sync_worker_celery.result import AsyncResult

from ._support import wait_for


def test_beat_schedule_becomes_server_schedules_that_run_the_task(sample_app, sample_worker) -> None:
    installed = install_beat_schedule(sample_app)
    assert installed == ["celery-beat-add-every-second", "celery-beat-nightly-greeting"]
    client = sample_app.client
    nightly = client.describe_schedule("celery-beat-nightly-greeting")
    assert nightly.spec["cron_expressions"] == ["30 2 * * *"]
    every = client.describe_schedule("celery-beat-add-every-second")
    assert every.spec["intervals"] == [{"every": "PT1S"}]
    assert every.action["workflow_type"] == "sync_worker_celery.canvas"
    assert every.action["task_queue"] == "proj-default"
    fired = wait_for(lambda: client.describe_schedule("celery-beat-add-every-second").latest_workflow_instance_id,
                     timeout=20)
    assert AsyncResult(fired, app=sample_app).get(timeout=20) == 32
    # installing again updates in place
    assert install_beat_schedule(sample_app) == installed
    for schedule_id in installed:
        client.delete_schedule(schedule_id)


class _NoSchedules:
    base_url = "http://old-server"

    def cluster_info(self, refresh: bool = False) -> Dict[str, Any]:
        return {"control_plane": {"version": "2"}}


def test_a_server_without_schedules_is_refused_with_the_reason() -> None:
    from sync_worker_celery import Celery

    app = Celery("beat-refusal", set_as_current=False)
    app.client = _NoSchedules()
    app.conf.beat_schedule = {"tick": {"task": "x.tick", "schedule": 5}}
    assert "does not advertise schedules" in str(schedules_unavailable_reason(app))
    with pytest.raises(UnsupportedFeature, match=r"beat_schedule \(1 entries\) is refused: the server at "
                                                 r"http://old-server does not advertise schedules"):
        install_beat_schedule(app)

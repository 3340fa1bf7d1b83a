"""``app.backend``: Celery's result-backend API read from the server; its write side refused by name."""

from __future__ import annotations

import pytest
from sync_worker_celery import states
from sync_worker_celery.exceptions import UnsupportedFeature
from sync_worker_celery.result import AsyncResult


@pytest.mark.usefixtures("sample_worker")
def test_backend_reads_task_state_and_result_from_the_server(sample_app) -> None:
    from proj.tasks import add, explode

    backend = sample_app.backend
    assert backend is sample_app.backend and add.backend is backend
    assert backend.ensure_chords_allowed() is None   # chords are canvas workflows: always allowed
    result = add.delay(20, 22)
    meta = backend.wait_for(result.id, timeout=30)
    assert (meta["task_id"], meta["status"], meta["result"]) == (result.id, states.SUCCESS, 42)
    assert backend.get_task_meta(result.id)["result"] == 42
    assert backend.get_state(result.id) == states.SUCCESS and backend.get_result(result.id) == 42
    assert AsyncResult(result.id, backend=backend).get(timeout=5) == 42
    failed = explode.delay("backend boom")
    meta = backend.wait_for(failed.id, timeout=30)
    assert meta["status"] == states.FAILURE and isinstance(meta["result"], ValueError)
    assert backend.get_task_meta("no-such-task")["status"] == states.PENDING


def test_what_the_server_owns_is_refused_by_name(sample_app) -> None:
    backend = sample_app.backend
    with pytest.raises(UnsupportedFeature, match="store_result"):
        backend.store_result("some-id", 1, states.SUCCESS)
    with pytest.raises(UnsupportedFeature, match=r"app\.backend\.get_key_for_group"):
        backend.get_key_for_group("gid", ".j")
    with pytest.raises(UnsupportedFeature, match="result_consumer"):
        backend.result_consumer.on_after_fork()


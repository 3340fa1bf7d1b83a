"""A task whose type no registered worker on its queue takes is logged once, naming the fix (issue 27:
a task module added while the worker runs)."""

from __future__ import annotations

import logging
from typing import Iterator

import pytest

from sync_worker.devserver import DevServer
from tests.unit.devserver._raw import Raw


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer() as server:
        yield Raw(server.url)


def _warnings(caplog: pytest.LogCaptureFixture) -> list:
    return [r.getMessage() for r in caplog.records
            if r.name == "sync_worker.devserver" and r.levelno == logging.WARNING
            and "waits on task queue" in r.getMessage()]


def test_a_type_no_registered_worker_takes_is_logged_once(raw: Raw, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sync_worker.devserver")
    raw.start("wf-early", workflow_type="reports.monthly", queue="q")  # no worker yet: ordinary, not logged
    assert _warnings(caplog) == []
    raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q", "supported_workflow_types": ["orders"],
                                         "supported_activity_types": []}, plane="worker")
    raw.start("wf-1", workflow_type="reports.monthly", queue="q")
    raw.start("wf-2", workflow_type="reports.monthly", queue="q")
    raw.start("wf-3", workflow_type="orders", queue="q")  # a registered type: nothing said
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert "a workflow task of type 'reports.monthly' waits on task queue 'q'" in said[0]
    assert "restart it after adding code" in said[0] and "--reload" in said[0]


def test_a_worker_that_declared_no_list_takes_any_type(raw: Raw, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sync_worker.devserver")
    raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q"}, plane="worker")
    raw.start("wf-1", workflow_type="anything", queue="q")
    assert _warnings(caplog) == []


def test_an_activity_type_is_checked_too(raw: Raw, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sync_worker.devserver")
    raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q", "supported_workflow_types": [],
                                         "supported_activity_types": ["send_email"]}, plane="worker")
    raw.ok("POST", "/activities", {"activity_type": "send_email", "task_queue": "q"})
    raw.ok("POST", "/activities", {"activity_type": "make_pdf", "task_queue": "q"})
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert said[0].startswith("an activity task of type 'make_pdf' waits on task queue 'q'"), said

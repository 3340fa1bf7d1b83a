"""The JSON log format and the task ids bound around a task (sync_worker.runtime.log_context)."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
from typing import Any, Dict, List

import click
import pytest
from click.testing import CliRunner

from sync_worker.cli.params import LOG_FORMAT_ENV, configure_logging, loglevel_option
from sync_worker.runtime import log_context
from sync_worker.worker.tasklog import format_received


def _logger(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"test.json.{id(stream)}")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, stream


def test_a_line_inside_a_task_carries_its_ids_and_extras_outside_none() -> None:
    logger, stream = _logger(log_context.JsonFormatter())
    raw = {"task_id": "at-1", "workflow_id": "wf-1", "run_id": "run-1", "activity_type": "billing.charge",
           "attempt_number": 2, "activity_attempt_id": "attempt-9"}
    with log_context.bound(log_context.task_fields("activity", raw, task_queue="billing", namespace="default")):
        logger.info(format_received("billing.charge", "attempt-9"))
        logger.warning("card %s declined", "4242", extra={"order_id": 7})
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("charge failed")
    logger.info("between tasks")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 4  # one object per line, a traceback included
    first, second, third, outside = lines
    assert first["message"] == "Task billing.charge[attempt-9] received" and first["level"] == "INFO"
    for record in (first, second, third):
        assert (record["task_kind"], record["task_id"], record["workflow_id"], record["run_id"]) == (
            "activity", "at-1", "wf-1", "run-1")
        assert (record["activity_type"], record["attempt"], record["task_queue"]) == ("billing.charge", 2, "billing")
        assert record["activity_attempt_id"] == "attempt-9" and record["namespace"] == "default"
    assert second["message"] == "card 4242 declined" and second["order_id"] == 7
    assert "ValueError: boom" in third["exc_info"]
    assert "task_id" not in outside and outside["ts"].endswith("Z")


def test_ids_do_not_leak_between_threads() -> None:
    seen: Dict[str, Any] = {}

    def task(name: str) -> None:
        with log_context.bound({"task_id": name}):
            threading.Event().wait(0.05)
            seen[name] = log_context.current()["task_id"]

    threads = [threading.Thread(target=task, args=(f"t{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {f"t{i}": f"t{i}" for i in range(8)} and log_context.current() == {}


def test_text_mode_keeps_the_celery_wording() -> None:
    logger, stream = _logger(log_context.formatter_for("text", "%(levelname)s %(message)s"))
    with log_context.bound({"task_id": "at-1"}):
        logger.info(format_received("billing.charge", "attempt-9"))
    assert stream.getvalue() == "INFO Task billing.charge[attempt-9] received\n"
    with pytest.raises(ValueError, match="unknown log format"):
        log_context.formatter_for("xml")


def test_every_command_takes_log_format_and_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    used: List[logging.Formatter] = []

    @click.command()
    @loglevel_option()
    def command(loglevel: str) -> None:
        handler = logging.StreamHandler(io.StringIO())
        configure_logging(loglevel, handlers=[handler])
        used.append(handler.formatter)  # type: ignore[arg-type]

    monkeypatch.delenv(LOG_FORMAT_ENV, raising=False)
    root = logging.getLogger()
    saved = list(root.handlers)
    root.handlers[:] = []
    try:
        runner = CliRunner()
        assert runner.invoke(command, ["--log-format", "json"]).exit_code == 0
        root.handlers[:] = []
        os.environ.pop(LOG_FORMAT_ENV, None)  # the flag is kept in the environment for child processes
        monkeypatch.setenv(LOG_FORMAT_ENV, "text")
        assert runner.invoke(command, []).exit_code == 0
        root.handlers[:] = []
        bad = runner.invoke(command, ["--log-format", "xml"])
        assert bad.exit_code == 2 and "xml" in bad.output
    finally:
        root.handlers[:] = saved
    assert isinstance(used[0], log_context.JsonFormatter) and not isinstance(used[1], log_context.JsonFormatter)

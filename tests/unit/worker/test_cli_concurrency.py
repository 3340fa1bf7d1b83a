"""``sync-worker run -c N | -c adaptive | --autoscale MAX,MIN`` and Worker(max_concurrent_activity_tasks=...)."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner

from sync_worker.cli import main
from sync_worker.worker import Worker, WorkerState
from sync_worker.worker.cli import EXIT_USAGE, _autoscale, load_worker

from .fakes import FakeClient

T = "tests.unit.worker._cli_targets"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["run", *args], env={"DURABLE_WORKFLOW_SERVER_URL": "http://127.0.0.1:9"})
    return result.exit_code, result.output


def test_adaptive_from_the_cli_loader() -> None:
    worker = load_worker(f"{T}:ready_worker", concurrency="adaptive")
    assert worker.activity_concurrency.mode == "adaptive" and worker.max_concurrent_activity_tasks == 32
    assert worker.task_slots()["activity_available"] == 1  # starts at min


def test_autoscale_is_celery_spelling_max_then_min() -> None:
    assert _autoscale("8,2") == {"max": 8, "min": 2}
    assert _autoscale("6") == {"max": 6, "min": 1}
    worker = load_worker(f"{T}:ready_worker", concurrency=_autoscale("8,2"))
    config = worker.activity_concurrency
    assert (config.mode, config.min, config.max, config.limit) == ("adaptive", 2, 8, 2)


def test_fixed_n_still_works() -> None:
    worker = load_worker(f"{T}:ready_worker", concurrency=5)
    assert worker.activity_concurrency.mode == "fixed" and worker.task_slots()["activity_available"] == 5


@pytest.mark.parametrize("args,text", [
    (("-c", "0"), "not a valid number of slots"),
    (("-c", "lots"), "neither a number of slots nor 'adaptive'"),
    (("--autoscale", "x,y"), "expected MAX[,MIN]"),
    (("--autoscale", "2,8"), "MIN 8 is above MAX 2"),
    (("--autoscale", "0"), "at least 1"),
    (("-c", "adaptive", "--autoscale", "4,1"), "either -c/--concurrency or --autoscale"),
])
def test_bad_concurrency_is_a_usage_error(args: tuple, text: str) -> None:
    code, output = invoke(f"{T}:ready_worker", *args)
    assert code == EXIT_USAGE, output
    assert text in output, output


def test_worker_accepts_every_form_and_refuses_bad_ones() -> None:
    worker = Worker(FakeClient(), task_queue="q", max_concurrent_activity_tasks={"max": 3, "ramAdmitPct": 60})
    assert worker.activity_concurrency.ram_admit_pct == 60 and worker.max_concurrent_activity_tasks == 3
    with pytest.raises(ValueError, match="unknown concurrency option"):
        Worker(FakeClient(), task_queue="q", max_concurrent_activity_tasks={"maximum": 3})
    with pytest.raises(ValueError, match="at least 1"):
        Worker(FakeClient(), task_queue="q", max_concurrent_activity_tasks=0)


def test_status_has_a_concurrency_block_only_with_activities() -> None:
    from sync_worker import workflow

    @workflow.defn(name="cliconc.wf")
    class Flow:
        def run(self, ctx: object) -> None:
            return None

    assert Worker(FakeClient(), task_queue="q", workflows=[Flow]).status().concurrency is None
    worker = load_worker(f"{T}:ready_worker", concurrency="adaptive")
    block = worker.status().concurrency
    assert block is not None and block.mode == "adaptive" and block.gate == "open" and block.in_flight == 0


def test_poller_flags_reach_the_worker_and_bad_counts_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import sync_worker.worker.cli as cli

    served: list = []
    monkeypatch.setattr(cli, "serve", lambda worker: served.append(worker) or 0)
    result = CliRunner().invoke(
        main, ["run", f"{T}:fresh_worker", "--activity-pollers", "4", "--workflow-pollers", "2"],
        env={"DURABLE_WORKFLOW_SERVER_URL": "http://127.0.0.1:9"})
    assert result.exit_code == 0, result.output
    assert [(w.max_concurrent_workflow_task_polls, w.max_concurrent_activity_task_polls) for w in served] == [(2, 4)]
    for flag in ("--activity-pollers", "--workflow-pollers"):
        code, output = invoke(f"{T}:fresh_worker", flag, "0")
        assert code == EXIT_USAGE and "0 is not in the range x>=1" in output, output


def test_poller_counts_are_fixed_once_the_worker_runs() -> None:
    worker = load_worker(f"{T}:fresh_worker")
    assert (worker.max_concurrent_workflow_task_polls, worker.max_concurrent_activity_task_polls) == (1, 1)
    worker.configure_pollers(activity=3)
    assert (worker.max_concurrent_workflow_task_polls, worker.max_concurrent_activity_task_polls) == (1, 3)
    with pytest.raises(ValueError, match="at least 1"):
        worker.configure_pollers(workflow=0)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while worker.state is not WorkerState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(RuntimeError, match="running worker"):
            worker.configure_pollers(activity=2)
    finally:
        worker.stop()
        runner.join(10)


@pytest.mark.parametrize("args, message", [
    (("-P", "prefork", "-c", "adaptive"), "-P prefork takes a number of processes"),
    (("-P", "prefork", "--autoscale", "4,1"), "-P prefork takes a number of processes"),
    (("-P", "threads", "--max-tasks-per-child", "5"), "recycle the children of -P prefork"),
    (("--max-memory-per-child", "1000"), "recycle the children of -P prefork"),
])
def test_prefork_flags_are_checked_before_the_target_loads(args: tuple, message: str) -> None:
    code, output = invoke(f"{T}:ready_worker", *args)
    assert code == EXIT_USAGE and message in output, output

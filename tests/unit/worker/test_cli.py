from __future__ import annotations

from click.testing import CliRunner

from sync_worker.cli import main
from sync_worker.worker.cli import EXIT_USAGE, load_worker

from . import _cli_targets

T = "tests.unit.worker._cli_targets"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["run", *args], env={"DURABLE_WORKFLOW_SERVER_URL": "http://127.0.0.1:9"})
    return result.exit_code, result.output


def test_gevent_pool_in_an_unpatched_process_is_a_usage_error_saying_how_to_fix_it() -> None:
    code, output = invoke(f"{T}:ready_worker", "-P", "gevent")
    assert code == EXIT_USAGE, output
    assert "monkey-patched" in output and "sync-worker run -P gevent" in output


def test_unknown_pool_is_a_usage_error() -> None:
    code, output = invoke(f"{T}:ready_worker", "-P", "eventlet")
    assert code == EXIT_USAGE and "unknown worker pool 'eventlet'" in output


def test_bad_targets_are_usage_errors() -> None:
    for target, text in ((f"{T}", "MODULE:ATTR"), ("no_such_module_xyz:w", "cannot import"),
                         (f"{T}:missing", "no attribute"), (f"{T}:not_a_worker", "neither a Worker"),
                         (f"{T}:bad_factory", "not a Worker")):
        code, output = invoke(target)
        assert code == EXIT_USAGE, (target, output)
        assert text in output, (target, output)


def test_task_queue_mismatch_is_refused() -> None:
    code, output = invoke(f"{T}:ready_worker", "-Q", "other")
    assert code == EXIT_USAGE and "serves task queue 'cli-q'" in output


def test_factory_receives_client_queue_and_concurrency() -> None:
    _cli_targets.CALLS.clear()
    worker = load_worker(f"{T}:factory", task_queue="fq", concurrency=4, server_url="http://127.0.0.1:9",
                         namespace="ns1")
    client, queue, concurrency = _cli_targets.CALLS[0]
    assert (queue, concurrency) == ("fq", 4)
    assert client.base_url == "http://127.0.0.1:9" and client.namespace == "ns1"
    assert worker.task_queue == "fq" and worker.task_slots()["activity_available"] == 4
    client.close()


def test_concurrency_resizes_a_ready_worker() -> None:
    worker = load_worker(f"{T}:ready_worker", concurrency=3)
    assert worker.task_slots()["activity_available"] == 3

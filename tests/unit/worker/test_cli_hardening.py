"""``sync-worker run`` refuses what it would silently ignore, and gives a clean exit-2 message
for targets that are not workers (issue 9)."""

from __future__ import annotations

from click.testing import CliRunner

from sync_worker.cli import main
from sync_worker.worker.cli import EXIT_USAGE, load_worker

T = "tests.unit.worker._cli_targets"


def invoke(*args: str, env: object = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["run", *args], env=env or {})  # type: ignore[arg-type]
    return result.exit_code, result.output


def test_connection_flags_with_a_ready_made_worker_are_refused() -> None:
    for flag, value in (("--server-url", "http://127.0.0.1:9"), ("--token", "t"), ("--namespace", "ns")):
        code, output = invoke(f"{T}:ready_worker", flag, value)
        assert code == EXIT_USAGE, (flag, output)
        assert f"{flag} would be ignored" in output and "factory" in output, output


def test_connection_settings_from_the_environment_do_not_conflict() -> None:
    worker = load_worker(f"{T}:ready_worker", server_url="http://127.0.0.1:9", explicit={})
    assert worker.task_queue == "cli-q"


def test_connection_flags_with_a_factory_without_client_are_refused() -> None:
    code, output = invoke(f"{T}:bad_factory", "--server-url", "http://127.0.0.1:9")
    assert code == EXIT_USAGE and "takes no 'client' parameter" in output, output


def test_an_activity_as_target_is_a_clean_usage_error() -> None:
    code, output = invoke(f"{T}:noop", env={"DURABLE_WORKFLOW_SERVER_URL": "http://127.0.0.1:9"})
    assert code == EXIT_USAGE, output
    assert "is the activity 'cli.noop', not a Worker" in output and "Traceback" not in output


def test_a_factory_that_raises_is_a_clean_usage_error() -> None:
    code, output = invoke(f"{T}:raising_factory", env={"DURABLE_WORKFLOW_SERVER_URL": "http://127.0.0.1:9"})
    assert code == EXIT_USAGE, output
    assert "raised RuntimeError: settings not configured" in output and "Traceback" not in output


def test_one_log_level_spelling_for_every_command() -> None:
    for command in (["run", f"{T}:noop"], ["devserver", "--port", "-1"]):
        for spelling in ("-l", "--loglevel", "--log-level"):
            result = CliRunner().invoke(main, [*command, spelling, "DEBUG", "--help"])
            assert result.exit_code == 0, (command, spelling, result.output)
            assert "-l, --loglevel" in result.output, (command, result.output)

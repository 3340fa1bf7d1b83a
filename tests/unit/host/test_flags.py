"""One spelling of each flag: ``--server-url`` everywhere (``--server`` an alias, ``-s`` on the
operator commands), ``-l/--loglevel`` (``--log-level`` an alias); the environment read once."""

from __future__ import annotations

from typing import Any, List

import click
import pytest
import responses
from click.testing import CliRunner

from sync_worker.cli import main
from tests._requests_mock import control_plane_on_requests  # noqa: F401  (a fixture)

T = "tests.unit.worker._cli_targets"


def _option(command: click.Command, name: str) -> click.Option:
    return next(p for p in command.params if isinstance(p, click.Option) and p.name == name)


def _commands() -> List[click.Command]:
    from sync_worker_celery.cli import beat_command, celery_command, worker_command

    from sync_worker.cli.namespace import namespace_group
    from sync_worker.nestjs.cli import nestjs_command
    from sync_worker.worker.cli import run_command

    listing = namespace_group.commands["list"]
    return [run_command, nestjs_command, celery_command, worker_command, beat_command, listing]


def test_every_worker_command_spells_the_server_and_log_level_flags_alike() -> None:
    for command in _commands():
        names = {p.name for p in command.params}
        if "server_url" in names:
            assert _option(command, "server_url").opts[:2] == ["--server-url", "--server"], command.name
            assert _option(command, "server_url").envvar is None  # ClientOptions reads the environment
        if "loglevel" in names:
            assert _option(command, "loglevel").opts == ["-l", "--loglevel", "--log-level"], command.name
    assert "-s" in _option(_commands()[-1], "server_url").opts  # the operator commands keep -s


@responses.activate
@pytest.mark.parametrize("flag", ["--server-url", "--server", "-s"])
@pytest.mark.usefixtures("control_plane_on_requests")
def test_operator_commands_take_every_spelling(flag: str) -> None:
    responses.get("http://flag.test/api/namespaces", json={"namespaces": []})
    result = CliRunner().invoke(main, ["namespace", "list", flag, "http://flag.test", "--json"],
                                env={"DURABLE_WORKFLOW_SERVER_URL": "http://env.test"})
    assert result.exit_code == 0, result.output
    assert responses.calls[0].request.url.startswith("http://flag.test/")


def test_operator_commands_name_a_bad_server_url() -> None:
    result = CliRunner().invoke(main, ["namespace", "list"], env={"DURABLE_WORKFLOW_SERVER_URL": "ftp://x"})
    assert result.exit_code == 2 and "DURABLE_WORKFLOW_SERVER_URL (environment) must be an http(s) origin" in (
        result.output)


@pytest.mark.parametrize("flag", ["--server-url", "--server"])
def test_run_takes_both_spellings_for_a_factory_client(flag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import sync_worker.worker.cli as cli

    from ..worker import _cli_targets

    monkeypatch.setattr(cli, "serve", lambda worker: 0)
    _cli_targets.CALLS.clear()
    result = CliRunner().invoke(main, ["run", f"{T}:factory", "-Q", "q", flag, "http://flag.test:1",
                                       "--log-level", "warning"], env={"DURABLE_WORKFLOW_AUTH_TOKEN": "env-token"})
    assert result.exit_code == 0, result.output
    client = _cli_targets.CALLS[0][0]
    assert (client.base_url, client.token, client.namespace) == ("http://flag.test:1", "env-token", "default")


def test_run_without_a_server_uses_the_local_default_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27: one server rule. ``run`` with neither flag nor variable connects to
    http://127.0.0.1:7233 (as the operator commands and the Celery app do) and logs why."""
    import sync_worker.worker.cli as cli

    from ..worker import _cli_targets

    monkeypatch.setattr(cli, "serve", lambda worker: 0)
    _cli_targets.CALLS.clear()
    with caplog.at_level("INFO", logger="sync_worker.host"):
        result = CliRunner().invoke(main, ["run", f"{T}:factory", "-Q", "q"], env={"DURABLE_WORKFLOW_SERVER_URL": ""})
    assert result.exit_code == 0, result.output
    assert _cli_targets.CALLS[0][0].base_url == "http://127.0.0.1:7233"
    assert "no server URL given (--server-url or DURABLE_WORKFLOW_SERVER_URL): using http://127.0.0.1:7233" in (
        caplog.text)


def test_the_django_command_takes_both_spellings() -> None:
    pytest.importorskip("django")
    from sync_worker_django.management.commands.durable_worker import Command

    parser = Command().create_parser("manage.py", "durable_worker")
    for flag in ("--server-url", "--server"):
        options: Any = parser.parse_args([flag, "http://x:1", "--log-level", "debug"])
        assert (options.server_url, options.loglevel) == ("http://x:1", "debug")

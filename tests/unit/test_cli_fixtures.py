"""``sync-worker`` operator commands against every control-plane fixture's ``cli`` section.

Each fixture's ``cli.argv`` (the Durable Workflow CLI's arguments) runs through our command of
the same operation; the request must be the fixture's: method, path, query (``expected_query``
or ``request.query``) and a body byte-equal to ``cli.expected_body`` (else ``request.body``),
serialised as our transport sends JSON. With ``--json`` the command prints the server's
response unchanged. ``responses`` plays the server; the fixtures are read at run time.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List
from urllib.parse import parse_qsl, urlsplit

import pytest
import responses
from click.testing import CliRunner

from sync_worker.cli import main
from tests._fixtures import fixture_paths, load_fixture
from tests._requests_mock import control_plane_on_requests  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("control_plane_on_requests")

BASE = "http://dw.test"
FOLDER = "sdk-python/tests/fixtures/control-plane"
WORKER_PLANE = ("workflow-task.", "query-task.", "activity.", "worker.register")

# operation -> our command words
COMMANDS: Dict[str, List[str]] = {
    "namespace.create": ["namespace", "create"], "namespace.delete": ["namespace", "delete"],
    "namespace.describe": ["namespace", "describe"], "namespace.list": ["namespace", "list"],
    "namespace.update": ["namespace", "update"], "namespace.set_storage_driver": ["namespace", "set-storage-driver"],
    "schedule.create": ["schedule", "create"], "schedule.update": ["schedule", "update"],
    "schedule.describe": ["schedule", "describe"], "schedule.list": ["schedule", "list"],
    "schedule.delete": ["schedule", "delete"], "schedule.pause": ["schedule", "pause"],
    "schedule.resume": ["schedule", "resume"], "schedule.trigger": ["schedule", "trigger"],
    "schedule.backfill": ["schedule", "backfill"], "schedule.history": ["schedule", "history"],
    "search_attribute.create": ["search-attribute", "create"],
    "search_attribute.delete": ["search-attribute", "delete"],
    "search_attribute.list": ["search-attribute", "list"], "storage.test": ["storage", "test"],
    "system.repair.status": ["system", "repair-status"], "system.repair.pass": ["system", "repair-pass"],
    "system.retention.status": ["system", "retention-status"], "system.retention.pass": ["system", "retention-pass"],
    "system.activity_timeout.status": ["system", "activity-timeout-status"],
    "system.activity_timeout.pass": ["system", "activity-timeout-pass"],
    "task_queue.list": ["task-queue", "list"], "task_queue.describe": ["task-queue", "describe"],
    "task_queue.build_ids": ["task-queue", "build-ids"], "task_queue.build_id.drain": ["task-queue", "drain"],
    "task_queue.build_id.promote": ["task-queue", "promote"], "task_queue.build_id.resume": ["task-queue", "resume"],
    "worker.list": ["worker", "list"], "worker.describe": ["worker", "describe"],
    "worker.deregister": ["worker", "deregister"],
    "workflow.start": ["workflow", "start"], "workflow.describe": ["workflow", "describe"],
    "workflow.list": ["workflow", "list"], "workflow.list_runs": ["workflow", "list-runs"],
    "workflow.show_run": ["workflow", "show-run"], "workflow.history": ["workflow", "history"],
    "workflow.history_export": ["workflow", "history-export"], "workflow.signal": ["workflow", "signal"],
    "workflow.query": ["workflow", "query"], "workflow.update": ["workflow", "update"],
    "workflow.cancel": ["workflow", "cancel"], "workflow.terminate": ["workflow", "terminate"],
    "workflow.repair": ["workflow", "repair"], "workflow.archive": ["workflow", "archive"],
    "bridge.webhook": ["bridge", "webhook"],
}


def _argv(spec: Dict[str, Any]) -> List[str]:
    """The fixture's argv mapping as a command line: positional values first, in order, then options."""
    positional = [str(v) for k, v in spec.items() if not k.startswith("-")]
    options: List[str] = []
    for key, value in spec.items():
        if not key.startswith("-"):
            continue
        if value is True:
            options.append(key)
        elif isinstance(value, list):
            for item in value:
                options += [key, str(item)]
        else:
            options += [key, str(value)]
    return positional + options


def _wire(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _query_value(value: Any) -> str:
    # A boolean goes on the wire as PHP's CLI puts it (http_build_query: 1 / 0), the only spelling the
    # server's ``boolean`` rule accepts in a query string (``?wait_new_event=false`` is a 422 there).
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


def _cli_fixtures() -> List[Any]:
    out = []
    for path in fixture_paths(FOLDER, "*-parity.json"):
        operation = json.loads(path.read_text(encoding="utf-8"))["operation"]
        if not operation.startswith(WORKER_PLANE):
            out.append(pytest.param(path.name, id=operation))
    return out


def test_every_control_plane_cli_operation_has_a_command() -> None:
    assert {p.id for p in _cli_fixtures()} == set(COMMANDS)


@pytest.mark.parametrize("name", _cli_fixtures())
@responses.activate
def test_cli_argv_produces_the_fixture_request(name: str) -> None:
    fixture = load_fixture(f"{FOLDER}/{name}")
    request, cli = fixture["request"], fixture["cli"]
    reply = fixture.get("response_body")
    if reply is None:
        reply = {"workflow_id": "wf-polyglot-231", "run_id": "run-1", "outcome": "accepted"}
    responses.add(request["method"], f"{BASE}/api{request['path']}", json=reply)
    argv = COMMANDS[fixture["operation"]] + _argv(cli["argv"])
    result = CliRunner().invoke(main, argv, env={"DURABLE_WORKFLOW_SERVER_URL": BASE,
                                                 "DURABLE_WORKFLOW_AUTH_TOKEN": "cli-token",
                                                 "DURABLE_WORKFLOW_NAMESPACE": "orders-prod"})
    assert result.exit_code == 0, result.output
    assert len(responses.calls) == 1
    sent = responses.calls[0].request
    url = urlsplit(sent.url)
    assert (sent.method, url.path) == (request["method"], "/api" + request["path"])
    assert sent.headers["Authorization"] == "Bearer cli-token"
    assert sent.headers["X-Namespace"] == "orders-prod"
    expected_query = cli.get("expected_query", request.get("query"))
    if expected_query is not None:
        assert dict(parse_qsl(url.query)) == {k: _query_value(v) for k, v in expected_query.items()}
    else:
        assert url.query == ""
    expected_body = cli.get("expected_body", request.get("body"))
    if expected_body is not None:
        assert sent.body == _wire(expected_body)
    elif request["method"] in ("GET", "DELETE"):
        assert sent.body is None
    if cli["argv"].get("--json"):
        assert json.loads(result.output) == reply


@responses.activate
def test_exit_codes_follow_the_status() -> None:
    runner = CliRunner()
    env = {"DURABLE_WORKFLOW_SERVER_URL": BASE}
    cases = [(404, {"reason": "workflow_not_found"}, 5), (401, {"reason": "unauthorized"}, 4),
             (403, {"reason": "forbidden"}, 4), (422, {"reason": "validation_failed"}, 2),
             (409, {"reason": "run_not_active"}, 2), (500, {"reason": "boom"}, 6)]
    for status, body, code in cases:
        responses.replace(responses.GET, f"{BASE}/api/workflows/wf-x", json=body, status=status) \
            if responses.registered() else responses.get(f"{BASE}/api/workflows/wf-x", json=body, status=status)
        result = runner.invoke(main, ["workflow", "describe", "wf-x", "--json"], env=env)
        assert result.exit_code == code, (status, result.output)
        # click 8.1 (Python 3.9) mixes stderr into stdout: read the JSON document at its start
        assert json.JSONDecoder().raw_decode(result.stdout)[0]["error"]["status"] == status
    result = runner.invoke(main, ["workflow", "start", "--type", "t", "--input", "{nope"], env=env)
    assert result.exit_code == 2 and "--input must be valid JSON" in result.output
    refused = runner.invoke(main, ["workflow", "describe", "wf-x"], env={"DURABLE_WORKFLOW_SERVER_URL":
                                                                         "http://127.0.0.1:9"})
    assert refused.exit_code == 3, refused.output


@responses.activate
def test_human_output_is_a_table() -> None:
    fixture = load_fixture(f"{FOLDER}/workflow-list-parity.json")
    responses.get(f"{BASE}/api/workflows", json=fixture["response_body"])
    result = CliRunner().invoke(main, ["workflow", "list"], env={"DURABLE_WORKFLOW_SERVER_URL": BASE})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["WORKFLOW_ID", "WORKFLOW_TYPE", "STATUS", "TASK_QUEUE", "RUN_ID"]
    assert lines[1].split()[:3] == ["wf-polyglot-list-1", "orders.process", "running"]
    assert "next page: --next-page-token next-polyglot-page" in result.output


@responses.activate
def test_flags_win_over_the_environment() -> None:
    responses.get("http://flag.test/api/namespaces", json={"namespaces": []})
    result = CliRunner().invoke(main, ["namespace", "list", "--server", "http://flag.test", "--token", "flag-token",
                                       "--namespace", "flag-ns", "--json"],
                                env={"DURABLE_WORKFLOW_SERVER_URL": BASE, "DURABLE_WORKFLOW_AUTH_TOKEN": "env-token",
                                     "DURABLE_WORKFLOW_NAMESPACE": "env-ns"})
    assert result.exit_code == 0, result.output
    sent = responses.calls[0].request
    assert (sent.headers["Authorization"], sent.headers["X-Namespace"]) == ("Bearer flag-token", "flag-ns")


@responses.activate
def test_output_jsonl_prints_one_object_per_line() -> None:
    fixture = load_fixture(f"{FOLDER}/workflow-list-parity.json")
    responses.get(f"{BASE}/api/workflows", json=fixture["response_body"])
    result = CliRunner().invoke(main, ["workflow", "list", "--output", "jsonl"],
                                env={"DURABLE_WORKFLOW_SERVER_URL": BASE})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [json.loads(line) for line in lines] == fixture["response_body"]["workflows"]
    as_json = CliRunner().invoke(main, ["workflow", "list", "--output", "json"],
                                 env={"DURABLE_WORKFLOW_SERVER_URL": BASE})
    assert json.loads(as_json.output) == fixture["response_body"]

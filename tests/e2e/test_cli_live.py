"""``sync-worker`` operator commands as real processes against the dev server.

The dev server and a worker run in this process (real sockets); every command is a separate
``python -m sync_worker.cli ...`` process that finds the server through
``DURABLE_WORKFLOW_SERVER_URL`` / ``DURABLE_WORKFLOW_NAMESPACE``, exactly as an operator's shell
would. Exit codes and ``--json`` output are what scripts rely on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from sync_worker import activity, payloads, workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer

from ._worker_support import RunningWorker, make_worker, unique_queue


@workflow.defn(name="cli.greeter")
class Greeter:
    def __init__(self) -> None:
        self.greeting = "hello"
        self.done = False

    @workflow.signal("finish")
    def finish(self, who: str) -> None:
        self.done = True
        self.greeting = f"{self.greeting} {who}"

    @workflow.update("set_greeting")
    def set_greeting(self, greeting: str) -> str:
        self.greeting = greeting
        return greeting

    @workflow.query("greeting")
    def current(self) -> str:
        return self.greeting

    def run(self, ctx: Any, name: str) -> Any:
        yield ctx.wait_condition(lambda: self.done)
        return f"{self.greeting} (for {name})"


@workflow.defn(name="cli.echo")
class Echo:
    def run(self, ctx: Any, value: Any) -> Any:
        if value == "fail":
            raise ValueError("asked to fail")
        return value
        yield  # pragma: no cover - a generator, as workflow code is


@activity.defn(name="cli.shout")
def shout(text: str) -> str:
    return text.upper()


@activity.defn(name="cli.refuse")
def refuse() -> None:
    raise PermissionError("not today")


@pytest.fixture(scope="module")
def served() -> Iterator[Tuple[DevServer, str]]:
    queue = unique_queue("cli")
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30, query_timeout_seconds=10) as server:
        client = Client(server.url)
        worker = make_worker(client, task_queue=queue, workflows=[Greeter, Echo], activities=[shout, refuse],
                             poll_timeout=2.0, shutdown_timeout=10.0)
        try:
            with RunningWorker(worker):
                yield server, queue
        finally:
            client.close()


def cli(server: DevServer, *argv: str, namespace: str = "default") -> Tuple[int, str, str]:
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=server.url, DURABLE_WORKFLOW_NAMESPACE=namespace)
    env.pop("DURABLE_WORKFLOW_AUTH_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "sync_worker.cli", *argv], env=env, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def ok_json(server: DevServer, *argv: str, **kwargs: Any) -> Any:
    code, out, err = cli(server, *argv, "--json", **kwargs)
    assert code == 0, (argv, out, err)
    return json.loads(out)


def test_workflow_commands(served: Tuple[DevServer, str]) -> None:
    server, queue = served
    wid = f"cli-{uuid.uuid4().hex[:8]}"
    started = ok_json(server, "workflow", "start", "--type", "cli.greeter", "--workflow-id", wid,
                      "--task-queue", queue, "--input", '["ada"]', "--memo", '{"by":"cli"}',
                      "--search-attr", "Tier=gold")
    assert started["workflow_id"] == wid and started["run_id"]
    described = ok_json(server, "workflow", "describe", wid)
    assert (described["workflow_type"], described["memo"]) == ("cli.greeter", {"by": "cli"})
    code, out, _ = cli(server, "workflow", "query", wid, "greeting")
    assert (code, out.strip()) == (0, '"hello"')
    updated = ok_json(server, "workflow", "update", wid, "set_greeting", "--wait", "completed", "--input", '["hi"]')
    assert updated["update_status"] == "completed"
    assert payloads.decode_envelope(updated["result_envelope"]) == "hi"
    assert ok_json(server, "workflow", "signal", wid, "finish", "--input", '["bob"]', "--request-id", "s-1")
    code, out, _ = cli(server, "workflow", "result", wid, "--timeout", "30")
    assert (code, json.loads(out)) == (0, "hi bob (for ada)")
    listed = ok_json(server, "workflow", "list", "--type", "cli.greeter", "--limit", "50")
    assert wid in [w["workflow_id"] for w in listed["workflows"]]
    code, table, _ = cli(server, "workflow", "list", "--type", "cli.greeter")
    assert code == 0 and table.splitlines()[0].split()[:3] == ["WORKFLOW_ID", "WORKFLOW_TYPE", "STATUS"]
    runs = ok_json(server, "workflow", "list-runs", wid)
    run_id = runs["runs"][0]["run_id"]
    assert ok_json(server, "workflow", "show-run", wid, run_id)["status"] == "completed"
    history = ok_json(server, "workflow", "history", wid, run_id)
    assert history["events"][-1]["event_type"] == "WorkflowCompleted"
    # Without a run id: the current run, as describe shows it (issue 27).
    assert ok_json(server, "workflow", "history", wid) == history
    code, table, err = cli(server, "workflow", "history", wid)
    assert code == 0 and "WorkflowCompleted" in table, err
    exported = ok_json(server, "workflow", "history-export", wid)
    assert exported["workflow"]["run_id"] == run_id and exported["dedupe_key"].endswith(f"{run_id}:12")
    # Payloads decoded by default (human and JSON); --raw keeps the server's codec + base64 blob.
    code, text, err = cli(server, "workflow", "describe", wid)
    assert code == 0 and 'input                      ["ada"]' in text and "blob" not in text, (text, err)
    assert 'output                     hi bob (for ada)' in text and "output_envelope" not in text, text
    decoded = ok_json(server, "workflow", "describe", wid)
    assert (decoded["input"], decoded["output"]) == (["ada"], "hi bob (for ada)") and "input_envelope" not in decoded
    raw = ok_json(server, "workflow", "describe", wid, "--raw")
    assert raw["input"]["codec"] == "avro" and payloads.decode_envelope(raw["input"]) == ["ada"]

    for verb, outcome in (("cancel", "WorkflowCancelled"), ("terminate", "WorkflowTerminated")):
        other = f"cli-{verb}-{uuid.uuid4().hex[:6]}"
        ok_json(server, "workflow", "start", "--type", "cli.greeter", "--workflow-id", other, "--task-queue",
                queue, "--input", '"zed"')
        code, _, err = cli(server, "workflow", verb, other, "--reason", "operator")
        assert code == 0, err
        code, out, err = cli(server, "workflow", "result", other, "--timeout", "30", "--json")
        assert code == 1 and json.loads(out)["status"] == outcome, (out, err)
        code, _, err = cli(server, "workflow", verb, other)  # the run is closed now
        assert code == 2 and "run_not_active" in err


def test_missing_workflow_and_unreachable_server_exit_codes(served: Tuple[DevServer, str]) -> None:
    server, _ = served
    code, out, err = cli(server, "workflow", "describe", "no-such-workflow", "--json")
    assert code == 5 and json.loads(out)["error"]["status"] == 404, err
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL="http://127.0.0.1:9")
    done = subprocess.run([sys.executable, "-m", "sync_worker.cli", "workflow", "list"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr


def test_activity_commands(served: Tuple[DevServer, str]) -> None:
    server, queue = served
    aid = f"cli-act-{uuid.uuid4().hex[:8]}"
    started = ok_json(server, "activity", "start", "--type", "cli.shout", "--activity-id", aid, "--task-queue",
                      queue, "--input", '["quiet"]', "--retry-policy", '{"max_attempts": 1}')
    assert started["activity_id"] == aid
    code, out, _ = cli(server, "activity", "result", aid, "--timeout", "30")
    assert (code, json.loads(out)) == (0, "QUIET")
    assert ok_json(server, "activity", "describe", aid)["status"] == "completed"
    assert aid in [a["activity_id"] for a in ok_json(server, "activity", "list", "--status", "completed")
                   ["activities"]]
    failing = f"cli-refuse-{uuid.uuid4().hex[:8]}"
    ok_json(server, "activity", "start", "--type", "cli.refuse", "--activity-id", failing, "--task-queue", queue,
            "--retry-policy", '{"max_attempts": 1}')
    code, out, err = cli(server, "activity", "result", failing, "--timeout", "30", "--json")
    assert code == 1
    assert json.loads(out)["failure_type"] == "PermissionError" and "not today" in err


def test_namespace_commands(served: Tuple[DevServer, str]) -> None:
    server, _ = served
    name = f"cli-ns-{uuid.uuid4().hex[:6]}"
    created = ok_json(server, "namespace", "create", name, "--description", "from the CLI", "--retention", "9")
    assert (created["name"], created["retention_days"]) == (name, 9)
    assert ok_json(server, "namespace", "update", name, "--retention", "10")["retention_days"] == 10
    assert ok_json(server, "namespace", "describe", name)["description"] == "from the CLI"
    assert name in [n["name"] for n in ok_json(server, "namespace", "list")["namespaces"]]
    assert ok_json(server, "namespace", "delete", name)["status"] == "deleted"
    code, _, _ = cli(server, "namespace", "describe", name)
    assert code == 5


def test_worker_and_task_queue_commands(served: Tuple[DevServer, str]) -> None:
    server, queue = served
    workers: List[Dict[str, Any]] = ok_json(server, "worker", "list", "--task-queue", queue)["workers"]
    assert len(workers) == 1 and workers[0]["task_queue"] == queue
    described = ok_json(server, "worker", "describe", workers[0]["worker_id"])
    assert "cli.greeter" in described["supported_workflow_types"]
    code, table, _ = cli(server, "worker", "list")
    assert code == 0 and table.splitlines()[0].startswith("WORKER_ID")
    listed = ok_json(server, "task-queue", "list")
    assert queue in [q["name"] for q in listed["task_queues"]]
    assert ok_json(server, "task-queue", "describe", queue)["name"] == queue
    assert ok_json(server, "task-queue", "build-ids", queue)["task_queue"] == queue
    drained = ok_json(server, "task-queue", "drain", queue, "--build-id", "b-old")
    assert (drained["build_id"], drained["drain_intent"]) == ("b-old", "draining")
    assert ok_json(server, "task-queue", "resume", queue, "--build-id", "b-old")["drain_intent"] == "active"
    assert ok_json(server, "task-queue", "promote", queue, "--build-id", "b-new")["new_start_selected"] is True
    code, table, _ = cli(server, "task-queue", "list")
    assert code == 0 and table.splitlines()[0].split() == ["NAME", "WORKFLOW_TASKS", "ACTIVITY_TASKS", "POLLERS"]


def test_history_export_repair_archive_commands(served: Tuple[DevServer, str]) -> None:
    server, queue = served
    wid = f"cli-ops-{uuid.uuid4().hex[:6]}"
    run_id = ok_json(server, "workflow", "start", "--type", "cli.greeter", "--workflow-id", wid, "--task-queue",
                     queue, "--input", '["ops"]')["run_id"]
    assert ok_json(server, "workflow", "repair", wid)["outcome"] == "repair_requested"
    code, out, err = cli(server, "workflow", "archive", wid, "--json")
    assert code == 2 and json.loads(out)["error"]["reason"] == "run_not_closed", err  # still open
    ok_json(server, "workflow", "signal", wid, "finish", "--input", '["ops"]')
    assert cli(server, "workflow", "result", wid, "--timeout", "30")[0] == 0
    code, out, _ = cli(server, "workflow", "history-export", wid, run_id)
    bundle = json.loads(out)
    assert code == 0 and bundle["schema"] == "durable-workflow.v2.history-export"
    assert bundle["workflow"]["instance_id"] == wid
    assert ok_json(server, "workflow", "archive", wid, "--reason", "done")["outcome"] == "archived"


def test_start_wait_exits_with_the_outcome(served: Tuple[DevServer, str]) -> None:
    server, queue = served
    done = ok_json(server, "workflow", "start", "--type", "cli.echo", "--task-queue", queue, "--input",
                   '[{"n": 9007199254740993}]', "--wait")
    assert (done["status"], done["result"]) == ("completed", {"n": 9007199254740993})
    code, out, err = cli(server, "workflow", "start", "--type", "cli.echo", "--task-queue", queue, "--input",
                         '"fail"', "--wait", "--json")
    assert code == 1 and json.loads(out)["status"] == "WorkflowFailed"
    assert "ValueError: asked to fail" in err

"""``sync-worker replay`` as a real process: histories recorded by one build, checked against others.

Runs of ``_replay_orders_v1`` are recorded on the dev server by real workers (three completed, one
still waiting on its timer, as a deploy would find them), saved as files (event lists and a
history export). Then separate ``python -m sync_worker replay`` processes check them: the
unchanged and a refactored module pass (exit 0); the deliberately changed module fails (exit 1)
naming each history, the recorded event and the changed line. The same from the server itself,
by ``--workflow-id`` and by ``--query``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.testing import WorkflowEnvironment
from tests.e2e import _replay_orders_v1 as v1

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V1, V1_REFACTORED, V2 = ("tests.e2e._replay_orders_v1", "tests.e2e._replay_orders_v1_refactored",
                         "tests.e2e._replay_orders_v2")
V2_FILE = os.path.join(REPO, "tests", "e2e", "_replay_orders_v2.py")


def _changed_line() -> int:
    lines = Path(V2_FILE).read_text().splitlines()
    return next(number for number, line in enumerate(lines, start=1) if "# CHANGED" in line)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """A server holding four runs of v1 (three done, one waiting), and their histories as files."""
    folder = tmp_path_factory.mktemp("histories")
    with WorkflowEnvironment.start_time_skipping() as env, \
            env.worker(workflows=[v1.Checkout], activities=[v1.reserve, v1.charge]):
        for number, wait_days in enumerate([1, 2, 3, 40]):
            handle = env.client.start_workflow("orders.checkout", f"o-{number}", wait_days,
                                               task_queue=env.task_queue, workflow_id=f"order-{number}",
                                               execution_timeout_seconds=90 * 86_400, run_timeout_seconds=90 * 86_400)
            if wait_days < 40:
                handle.result(timeout=30)
        env.sleep(5 * 86_400)  # order-3 is still waiting on its 40-day timer
        assert env.client.describe_workflow("order-3").status in ("waiting", "running")
        for number in range(4):
            run_id = env.client.describe_workflow(f"order-{number}").run_id
            assert run_id is not None
            events = list(env.client.iter_history(f"order-{number}", run_id))
            (folder / f"order-{number}.json").write_text(json.dumps({"events": events}))
        run_id = env.client.describe_workflow("order-0").run_id
        assert run_id is not None
        (folder / "exports").mkdir()
        (folder / "exports" / "order-0.json").write_text(json.dumps(env.client.export_history("order-0", run_id)))
        yield {"folder": folder, "env": env}


def replay(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_WORKFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "sync_worker", "replay", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)


def test_the_unchanged_and_a_refactored_build_replay_every_history(recorded: Dict[str, Any]) -> None:
    for module in (V1, V1_REFACTORED):
        result = replay(module, "-f", str(recorded["folder"]))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "5 histories: 5 replayed, 0 non-deterministic, 0 failed, 0 skipped" in result.stdout


def test_the_changed_build_is_caught_with_the_event_and_the_line(recorded: Dict[str, Any]) -> None:
    result = replay(V2, "-f", str(recorded["folder"]))
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "5 histories: 0 replayed, 5 non-deterministic, 0 failed, 0 skipped" in out
    assert out.count("NONDET") == 5
    assert "Recorded activity_type 'orders.reserve', but current workflow scheduled 'orders.fraud_check'" in out
    assert out.count(f"workflow code: {V2_FILE}:{_changed_line()} in run") == 5
    assert "ActivityScheduled (workflow sequence 1)" in out


def test_the_json_report(recorded: Dict[str, Any]) -> None:
    result = replay(V2, "-f", str(recorded["folder"] / "order-3.json"), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    (check,) = report["histories"]
    assert (check["status"], check["workflow_id"], check["workflow_sequence"]) == ("nondeterministic", "order-3", 1)
    assert check["event_type"] == "ActivityScheduled"
    assert check["code_position"] == {"filename": V2_FILE, "lineno": _changed_line(), "function": "run",
                                      "after_return": False}


def test_histories_straight_from_the_server(recorded: Dict[str, Any]) -> None:
    url = recorded["env"].server.url
    changed = replay(V2, "--workflow-id", "order-3", "--server-url", url)
    assert changed.returncode == 1 and "order-3/" in changed.stdout and "NONDET" in changed.stdout
    listed = replay(V1, "--query", "order-", "--server-url", url)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "4 histories: 4 replayed" in listed.stdout
    one = replay(V1, "--query", "order-2", "--server-url", url)
    assert "1 histories: 1 replayed" in one.stdout


def test_usage_and_unreachable_server(recorded: Dict[str, Any], tmp_path: Path) -> None:
    nothing = replay(V1)
    assert nothing.returncode == 2 and "give histories" in nothing.stderr
    not_workflows = replay("json", "-f", str(recorded["folder"]))
    assert not_workflows.returncode == 2 and "names no @workflow.defn class" in not_workflows.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    none_found = replay(V1, "-f", str(empty))
    assert none_found.returncode == 2 and "no histories were found" in none_found.stderr
    unreachable = replay(V1, "--workflow-id", "order-1", "--server-url", "http://127.0.0.1:9")
    assert unreachable.returncode == 3, unreachable.stdout + unreachable.stderr


def test_histories_of_other_types_are_skipped_not_failed(recorded: Dict[str, Any], tmp_path: Path) -> None:
    foreign: List[Dict[str, Any]] = [{"event_type": "WorkflowStarted", "payload": {"workflow_type": "billing.other"}}]
    (tmp_path / "other.json").write_text(json.dumps(foreign))
    result = replay(V1, "-f", str(tmp_path / "other.json"), "-f", str(recorded["folder"] / "order-1.json"))
    assert result.returncode == 0, result.stdout
    assert "skipped  " in result.stdout and "'billing.other' is not registered" in result.stdout


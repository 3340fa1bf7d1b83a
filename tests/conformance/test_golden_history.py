"""Golden histories (sdk-python ``golden_history/``) replayed with the re-authored workflows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

from sync_worker import payloads
from sync_worker.errors import WorkflowPayloadDecodeError
from sync_worker.workflow import WorkflowRegistry, execute_workflow_task, replay
from tests._fixtures import fixture_paths, fixtures_dir, load_fixture
from tests.unit.workflow.golden_workflows import ALL

GOLDEN_DIR = "sdk-python/tests/fixtures/golden_history"
REGISTRY = WorkflowRegistry(ALL)


def _cases() -> List[Any]:
    params = []
    for path in fixture_paths(GOLDEN_DIR):
        data = load_fixture(f"{GOLDEN_DIR}/{path.name}")
        for case in data["cases"]:
            params.append(pytest.param(path, case, id=f"{path.stem}:{case['name']}"))
    return params


def _codec(path: Path) -> Any:
    return load_fixture(f"{GOLDEN_DIR}/{path.name}")["source"].get("payload_codec")


def _check_expected(commands: List[Dict[str, Any]], expected: Dict[str, Any]) -> None:
    last = commands[-1]
    if expected["command_type"] == "CompleteWorkflow":
        assert last["type"] == "complete_workflow"
        assert payloads.decode_envelope(last["result"]) == expected["result"]
    else:
        assert expected["command_type"] == "ScheduleActivity"
        assert last["type"] == "schedule_activity"
        assert last["activity_type"] == expected["activity_type"]
        assert payloads.decode_envelope(last["arguments"]) == expected["arguments"]


@pytest.mark.parametrize(("path", "case"), _cases())
def test_golden_history_case(path: Path, case: Dict[str, Any]) -> None:
    fixtures_dir()
    codec = _codec(path)
    if codec != "avro":
        # Pre-Avro histories (JSON text payloads, no codec) must be refused, never guessed.
        cls = REGISTRY.get(case["workflow_type"])
        assert cls is not None
        if any(event["payload"].get(key) for event in case["history"] for key in ("result", "arguments")):
            with pytest.raises(WorkflowPayloadDecodeError, match="unsupported_payload_codec"):
                replay(cls, case["history"], case["start_input"], payload_codec=codec)
            return
    task = {"task_id": "t-1", "workflow_type": case["workflow_type"], "workflow_id": "wf-golden",
            "run_id": "run-golden", "payload_codec": "avro", "arguments": payloads.envelope(case["start_input"])}
    outcome = execute_workflow_task(REGISTRY, task, case["history"], task_queue="golden-queue")
    assert outcome.failure is None, outcome.failure
    _check_expected(outcome.commands, case["expected"])


def test_every_golden_family_is_covered() -> None:
    fixtures_dir()
    families = {case.values[1]["family"] for case in _cases()}
    assert families == {"activity", "signal-update", "wait-condition", "version-marker", "saga-compensation"}

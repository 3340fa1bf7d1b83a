"""Replay regression corpora: sdk-python ``replay_regressions/`` and the language-neutral
PHP-side cases under ``workflow/tests/Fixtures/V2/ReplayRegression/``.

PHP-side cases NOT replayed here (PHP-runtime specific, see docs/workflows.md):
``constructor-injected-workflow-activity`` (PHP dependency injection),
``workflow-fiber-activity-command-sequence`` (PHP fiber command log, no history),
``history-import-codec-looking-user-metadata`` (PHP embedded history-import format: plain
memo maps instead of Avro envelopes). The two malformed-service-response cases are Nexus
histories, which this replayer refuses as a whole (checked below).
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import WorkflowPayloadDecodeError
from sync_worker.workflow import WorkflowRegistry, execute_workflow_task, replay
from tests._fixtures import fixture_paths, fixtures_dir, load_fixture
from tests.unit.workflow.golden_workflows import ALL

SDK_DIR = "sdk-python/tests/fixtures/replay_regressions"
PHP_DIR = "workflow/tests/Fixtures/V2/ReplayRegression"


@workflow.defn(name="Tests\\Fixtures\\V2\\TestServiceResponseReplayWorkflow")
class PhpServiceResponse:
    """Stands in for the PHP Nexus workflow: its history must be refused before it runs."""

    def run(self, ctx: Any) -> Any:
        return (yield ctx.schedule_activity("never-reached", []))


REGISTRY = WorkflowRegistry([*ALL, PhpServiceResponse])


def _task(fixture: Dict[str, Any]) -> Dict[str, Any]:
    spec = fixture["workflow"]
    arguments = spec.get("input", spec.get("arguments", []))
    return {"task_id": "t-1", "workflow_type": spec["type"], "workflow_id": f"regression-corpus-{fixture['id']}",
            "run_id": f"regression-corpus-run-{fixture['id']}", "payload_codec": "avro",
            "arguments": payloads.envelope(arguments)}


def _run(fixture: Dict[str, Any]) -> Any:
    return execute_workflow_task(REGISTRY, _task(fixture), fixture["history"], task_queue="regression-queue")


def _sdk_cases() -> List[Any]:
    return [pytest.param(path.name, id=path.stem) for path in fixture_paths(SDK_DIR)]


@pytest.mark.parametrize("name", _sdk_cases())
def test_sdk_replay_regression(name: str) -> None:
    fixtures_dir()
    fixture = load_fixture(f"{SDK_DIR}/{name}")
    expected = fixture["expected"]
    codec = fixture["workflow"].get("payload_codec")
    if codec != "avro":
        # The same scenario with codec-less JSON text payloads: refused, never decoded.
        cls = REGISTRY.get(fixture["workflow"]["type"])
        assert cls is not None
        with pytest.raises(WorkflowPayloadDecodeError, match="unsupported_payload_codec"):
            replay(cls, fixture["history"], fixture["workflow"]["input"], payload_codec=codec)
        return
    outcome = _run(fixture)
    if "error" in expected:
        assert outcome.commands == []
        assert outcome.failure is not None and expected["error"] in outcome.failure["message"]
        return
    assert outcome.failure is None, outcome.failure
    if "command_sequence" in expected:
        assert len(outcome.commands) == len(expected["command_sequence"])
        for produced, wanted in zip(outcome.commands, expected["command_sequence"]):
            assert {key: produced.get(key) for key in wanted} == wanted
        return
    assert expected.get("type", "complete_workflow") == "complete_workflow"
    assert expected.get("command_type", "CompleteWorkflow") == "CompleteWorkflow"
    last = outcome.commands[-1]
    assert last["type"] == "complete_workflow"
    assert payloads.decode_envelope(last["result"]) == expected["result"]


@pytest.mark.parametrize("name", ["parallel-timer-group-reverse-completion.json",
                                  "parallel-child-group-final-sibling-release.json",
                                  "workflow-fiber-activity-history-sequence.json"])
def test_php_replay_regression_completes(name: str) -> None:
    fixtures_dir()
    fixture = load_fixture(f"{PHP_DIR}/{name}")
    outcome = _run(fixture)
    assert outcome.failure is None, outcome.failure
    assert [command["type"] for command in outcome.commands] == [c["type"] for c in fixture["expected"]["commands"]]
    assert payloads.decode_envelope(outcome.commands[-1]["result"]) == fixture["expected"]["result"]


def test_php_json_tagged_replay_payload_is_rejected() -> None:
    fixtures_dir()
    fixture = load_fixture(f"{PHP_DIR}/json-tagged-payload-codec-rejected.json")
    outcome = _run(fixture)
    assert outcome.commands == []
    assert outcome.failure is not None
    assert fixture["expected_failure"]["type"] in outcome.failure["message"]
    assert outcome.failure["message"].startswith("replay failed: ")


@pytest.mark.parametrize("name", ["embedded-malformed-service-response.json",
                                  "workflow-fiber-malformed-service-response.json"])
def test_php_service_call_histories_are_refused(name: str) -> None:
    fixtures_dir()
    fixture = load_fixture(f"{PHP_DIR}/{name}")
    outcome = _run(fixture)
    assert outcome.commands == []
    assert outcome.failure is not None and outcome.failure["type"] == "UnsupportedReplayHistory"


def test_every_sdk_regression_fixture_is_listed() -> None:
    fixtures_dir()
    assert len(_sdk_cases()) == 7

"""The dev server takes the Durable Workflow CLI's plain-JSON argument lists (``input: [...]``)."""

from __future__ import annotations

from typing import Any

import pytest

from sync_worker import errors
from sync_worker.client import Client
from sync_worker.devserver.payload_checks import plain_json_arguments


def test_plain_lists_become_avro_envelopes_and_others_pass_unchanged() -> None:
    body = plain_json_arguments({"input": [1, {"a": [True, None]}], "action": {"input": ["x"]}, "memo": [1]})
    assert body["input"]["codec"] == "avro" and body["action"]["input"]["codec"] == "avro"
    assert body["memo"] == [1]
    envelope = {"codec": "avro", "blob": "wwHioz3/VYAiNwRU"}
    assert plain_json_arguments({"input": envelope}) == {"input": envelope}
    assert plain_json_arguments([1]) == [1]


def test_a_start_with_plain_input_runs_with_those_arguments(dev_server: Any) -> None:
    with Client(dev_server.url) as client:
        client.request("POST", "/workflows", body={"workflow_type": "t", "workflow_id": "plain-1",
                                                   "task_queue": "q", "input": ["ada", {"n": 9007199254740993}]})
        assert client.describe_workflow("plain-1").input == ["ada", {"n": 9007199254740993}]
        with pytest.raises(errors.InvalidArgument):
            client.request("POST", "/workflows", body={"workflow_type": "t", "workflow_id": "plain-2",
                                                       "task_queue": "q", "input": "not a list or envelope"})

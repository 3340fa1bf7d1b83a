"""Every shared Avro Value vector: golden cases, server-parity codec cases, codec-regression corpora."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from sync_worker.errors import PayloadDecodeError, UnsupportedPayloadCodec
from sync_worker.payloads import FINGERPRINT_HEX, decode, decode_envelope, encode
from tests._fixtures import FIXTURES_DIR, fixture_paths, fixtures_dir, load_fixture
from tests._values import strictly_equal

SDK_GOLDEN = "sdk-python/schema/avro-value-v1-golden.json"
PHP_GOLDEN = "workflow/resources/protocol/avro-value-v1-golden.json"
SERVER_CODEC = "server-index/tests/Fixtures/ServerParity/Codec/v1.json"
REGRESSION_DIRS = (
    "sdk-python/tests/fixtures/codec_regressions",
    "workflow/tests/Fixtures/V2/CodecRegression",
    "server-index/tests/Fixtures/CodecRegression",
)


def _section(relative: str, key: str) -> List[Any]:
    """Entries of one fixture list, read at collection time (empty if the fixtures are absent)."""
    path = FIXTURES_DIR / relative
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as handle:
        return list(json.load(handle)[key])


def _params(relative: str, key: str, name_key: str = "name") -> List[Any]:
    return [pytest.param(entry, id=f"{Path(relative).parts[0]}:{entry[name_key]}") for entry in _section(relative, key)]




def typed_value(description: Dict[str, Any]) -> Any:
    """Build a Python value from the fixtures' typed description (longs are decimal strings)."""
    kind = description["type"]
    if kind == "null":
        return None
    if kind == "boolean":
        assert type(description["value"]) is bool
        return description["value"]
    if kind == "long":
        return int(description["value"])
    if kind == "double":
        return float(description["value"])
    if kind == "string":
        return str(description["value"])
    if kind == "bytes":
        return base64.b64decode(description["base64"], validate=True)
    if kind == "array":
        return [typed_value(item) for item in description["items"]]
    if kind == "map":
        return {entry["key"]: typed_value(entry["value"]) for entry in description["entries"]}
    raise AssertionError(f"unknown typed value kind {kind!r}")


def golden_expected(case: Dict[str, Any]) -> Tuple[bool, Any]:
    """(has_value, value) for a golden case; array/map cases carry only their wire bytes."""
    kind = case["kind"]
    if kind == "null":
        return True, None
    if kind == "bytes":
        return True, base64.b64decode(case["value_base64"], validate=True)
    if "value" not in case:
        return False, None
    value = case["value"]
    if kind == "long":
        return True, int(value)
    if kind == "double":
        return True, float(value)
    return True, value


# ---------------------------------------------------------------------------
# Golden vectors (SDK copy, and the PHP package's copy)


def test_vector_files_are_present_and_agree() -> None:
    fixtures_dir()
    sdk = load_fixture(SDK_GOLDEN)
    php = load_fixture(PHP_GOLDEN)
    assert sdk == php
    assert sdk["fingerprint"] == FINGERPRINT_HEX
    assert sdk["magic_hex"] == "c301"
    assert len(sdk["cases"]) >= 16 and len(sdk["malformed_frames"]) >= 18
    assert len(load_fixture(SERVER_CODEC)["cases"]) >= 15
    assert sum(len(fixture_paths(folder)) for folder in REGRESSION_DIRS) >= 7


@pytest.mark.parametrize("case", _params(SDK_GOLDEN, "cases") + _params(PHP_GOLDEN, "cases"))
def test_golden_case_round_trips_byte_for_byte(case: Dict[str, Any]) -> None:
    wire = case["wire_base64"]
    value = decode(wire)
    assert encode(value) == wire
    has_value, expected = golden_expected(case)
    if has_value:
        assert strictly_equal(value, expected)
        assert encode(expected) == wire


def test_golden_composites_decode_to_the_documented_shapes() -> None:
    cases = {case["name"]: case["wire_base64"] for case in load_fixture(SDK_GOLDEN)["cases"]}
    assert strictly_equal(decode(cases["map_key_0"]), {"0": "zero"})
    assert strictly_equal(decode(cases["map_keys_0_1"]), {"0": "zero", "1": "one"})
    assert strictly_equal(decode(cases["map_empty"]), {})
    assert strictly_equal(decode(cases["negative_zero"]), -0.0)
    assert math.copysign(1.0, decode(cases["negative_zero"])) == -1.0


@pytest.mark.parametrize("case", _params(SDK_GOLDEN, "malformed_frames") + _params(PHP_GOLDEN, "malformed_frames"))
def test_malformed_frame_is_rejected_with_its_reason(case: Dict[str, Any]) -> None:
    with pytest.raises(PayloadDecodeError) as raised:
        decode(case["wire_base64"])
    assert raised.value.reason == case["error"]
    assert str(raised.value).startswith(case["error"])


@pytest.mark.parametrize(
    "case", _params(SDK_GOLDEN, "alternate_map_orders") + _params(PHP_GOLDEN, "alternate_map_orders")
)
def test_alternate_map_orders_decode_equal(case: Dict[str, Any]) -> None:
    wires = case["wire_base64"]
    assert len(wires) >= 2
    values = [decode(wire) for wire in wires]
    for value in values[1:]:
        assert value == values[0]
    # each ordering is reproduced exactly from its decoded (insertion-ordered) dict
    for wire, value in zip(wires, values):
        assert encode(value) == wire


# ---------------------------------------------------------------------------
# Server parity codec cases


@pytest.mark.parametrize("case", _params(SERVER_CODEC, "cases", name_key="id"))
def test_server_parity_codec_case(case: Dict[str, Any]) -> None:
    value = typed_value(case["value"])
    blob = encode(value)
    assert strictly_equal(decode(blob), value)
    assert encode(decode(blob)) == blob
    if "wire_base64" in case:
        assert blob == case["wire_base64"]


def test_server_parity_long_beyond_double_precision_is_exact() -> None:
    cases = {case["id"]: case for case in load_fixture(SERVER_CODEC)["cases"]}
    value = decode(encode(typed_value(cases["long-beyond-json-exact"]["value"])))
    assert value == 9007199254740993 and type(value) is int


# ---------------------------------------------------------------------------
# Codec-regression corpora


def _regression_params() -> List[Any]:
    params = []
    for folder in REGRESSION_DIRS:
        for path in fixture_paths(folder):
            params.append(pytest.param(path, id=f"{Path(folder).parts[0]}:{path.stem}"))
    return params


def _task_codec_envelopes(task: Dict[str, Any], blob: str) -> List[Dict[str, Any]]:
    envelope: Dict[str, Any] = {"blob": blob}
    if "payload_codec" in task:
        envelope["codec"] = task["payload_codec"]
    return [envelope]


@pytest.mark.parametrize("path", _regression_params())
def test_codec_regression(path: Path) -> None:
    fixture = json.loads(path.read_text(encoding="utf-8"))
    assert fixture["fixture_schema"] == "durable-workflow.codec-regression/v1"
    codec = fixture["protocol"]["codec"]
    wire = fixture["framing"]["wire_base64"]
    policy = fixture["failure_policy"]
    if policy["operation"] == "round_trip":
        assert codec == "avro"
        value = typed_value(fixture["value"])
        assert strictly_equal(decode(wire), value)
        assert encode(value) == wire
        assert strictly_equal(decode_envelope({"codec": "avro", "blob": wire}), value)
        return
    assert policy["operation"] == "decode_reject", policy
    error = policy["error"]
    if codec == "avro":
        with pytest.raises(PayloadDecodeError) as raised:
            decode_envelope({"codec": "avro", "blob": wire})
        assert raised.value.reason == error
        return
    assert error == "unsupported_payload_codec"
    attempts: List[Tuple[Any, Any]] = []
    if codec == "task-root":
        # The wire is a JSON list of task documents whose payload_codec is missing or null.
        tasks = json.loads(base64.b64decode(wire))
        assert tasks and all(isinstance(task, dict) for task in tasks)
        valid_blob = encode(None)
        for task in tasks:
            assert task.get("payload_codec") is None
            for envelope in _task_codec_envelopes(task, valid_blob):
                attempts.append((envelope, None))
            attempts.append((valid_blob, task.get("payload_codec")))
    else:
        attempts.append(({"codec": codec, "blob": wire}, None))
        attempts.append((wire, codec))
    for payload, sibling_codec in attempts:
        with pytest.raises(UnsupportedPayloadCodec) as raised:
            decode_envelope(payload, codec=sibling_codec)
        assert raised.value.reason == "unsupported_payload_codec"
        assert str(raised.value).startswith("unsupported_payload_codec")

"""``RuntimeExternalPayloadReference``: the SDK's value type, its checks and its wire form."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from sync_worker import RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA, RuntimeExternalPayloadReference
from sync_worker.errors import ExternalPayloadUnsupported

GOOD: Dict[str, Any] = {"schema": RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA,
                        "reference_id": "ep_01J9Z8Y7X6W5V4T3S2R1Q0P9N8", "codec": "avro", "size_bytes": 12,
                        "sha256": "ab" * 32}


def test_round_trip() -> None:
    reference = RuntimeExternalPayloadReference.from_dict(dict(GOOD))
    assert reference.to_dict() == GOOD
    assert RuntimeExternalPayloadReference(reference_id=GOOD["reference_id"], sha256=GOOD["sha256"], size_bytes=12,
                                           codec="avro") == reference


@pytest.mark.parametrize("change, why", [
    ({"schema": "durable-workflow.v2.external-payload-reference.v1"}, "schema"),
    ({"reference_id": "ep_lowercase0000000000000000000"}, "reference_id is malformed"),
    ({"reference_id": "ep_01J9Z8Y7X6W5V4T3S2R1Q0P9NU"}, "reference_id is malformed"),  # U is not Crockford
    ({"codec": "json"}, "unsupported_payload_codec"),
    ({"size_bytes": -1}, "size_bytes"),
    ({"size_bytes": True}, "size_bytes"),
    ({"sha256": "AB" * 32}, "sha256"),
    ({"sha256": "ab"}, "sha256"),
    ({"extra": 1}, "exactly"),
])
def test_malformed_references_are_refused_with_a_typed_error(change: Dict[str, Any], why: str) -> None:
    with pytest.raises(ExternalPayloadUnsupported, match=why) as caught:
        RuntimeExternalPayloadReference.from_dict({**GOOD, **change})
    assert caught.value.reason == "external_payload_unsupported"


def test_a_missing_key_or_a_non_object_is_refused() -> None:
    for data in ({k: v for k, v in GOOD.items() if k != "sha256"}, ["not", "an", "object"]):
        with pytest.raises(ExternalPayloadUnsupported):
            RuntimeExternalPayloadReference.from_dict(data)

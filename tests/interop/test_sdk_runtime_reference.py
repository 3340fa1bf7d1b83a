"""Our ``RuntimeExternalPayloadReference`` accepts and refuses what the published SDK's does."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from durable_workflow import RuntimeExternalPayloadReference as SdkReference
from durable_workflow.errors import ExternalPayloadUnsupported as SdkUnsupported

from sync_worker import RuntimeExternalPayloadReference
from sync_worker.errors import ExternalPayloadUnsupported
from tests.unit.test_runtime_reference import GOOD

CASES = [{}, {"schema": "x"}, {"reference_id": "ep_1"}, {"reference_id": "ep_01J9Z8Y7X6W5V4T3S2R1Q0P9NU"},
         {"codec": "json"}, {"codec": None}, {"size_bytes": -1}, {"size_bytes": 1.5}, {"size_bytes": 0},
         {"sha256": "AB" * 32}, {"sha256": "g" * 64}, {"extra": 1}]


@pytest.mark.parametrize("change", CASES)
def test_same_verdict_and_same_wire_as_the_sdk(change: Dict[str, Any]) -> None:
    data = {**GOOD, **change}
    try:
        theirs: Any = SdkReference.from_dict(dict(data)).to_dict()
    except SdkUnsupported as error:
        theirs = ("refused", str(error).split(":")[0])
    try:
        ours: Any = RuntimeExternalPayloadReference.from_dict(dict(data)).to_dict()
    except ExternalPayloadUnsupported as error:
        ours = ("refused", str(error).split(":")[0])
    assert ours == theirs

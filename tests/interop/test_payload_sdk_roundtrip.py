"""Our Avro Value codec against the published SDK's serializer and against raw fastavro."""

from __future__ import annotations

import base64
import io
import json
import math
from typing import Any, Dict, List, Tuple

import fastavro
import pytest
from durable_workflow import serializer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from sync_worker.errors import PayloadDecodeError, PayloadEncodeError
from sync_worker.payloads import FINGERPRINT_HEX, SCHEMA_JSON, decode, encode
from tests._fixtures import FIXTURES_DIR, load_fixture
from tests._values import strictly_equal

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
NAMESPACE = "durable_workflow.protocol."
PARSED_SCHEMA = parse_schema(json.loads(SCHEMA_JSON))


def _benchmark_value() -> Any:
    path = FIXTURES_DIR / "sdk-python/schema/avro-value-benchmark-v1.json"
    if not path.is_file():
        return {"benchmark": "fixture absent"}
    return _untag(json.loads(path.read_text(encoding="utf-8"))["value"])


def _untag(value: Any) -> Any:
    """The benchmark corpus writes bytes as {"$avro_bytes": base64}."""
    if isinstance(value, dict):
        if set(value) == {"$avro_bytes"}:
            return base64.b64decode(value["$avro_bytes"], validate=True)
        return {key: _untag(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_untag(item) for item in value]
    return value


CORPUS: List[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    63,
    -64,
    64,
    2**31,
    -(2**31) - 1,
    INT64_MIN,
    INT64_MAX,
    0.0,
    -0.0,
    1.5,
    -2.75,
    1e308,
    5e-324,
    math.pi,
    "",
    "hello, world",
    "h\u00e9llo \u4e16\u754c \U0001f600",
    "x" * 10_000,
    b"",
    bytes(range(256)),
    [],
    ["world"],
    [1, [2, [3, [4, []]]]],
    {},
    {"a": 1},
    {"0": "zero", "01": b"\x00\xff", "": None},
    {"nested": {"deeper": {"list": [True, 1.0, "s", b"b", None, {}]}}},
    list(range(-500, 500)),
    {f"key-{index}": index * 1.5 for index in range(200)},
    _benchmark_value(),
]




def sdk_encode(value: Any) -> str:
    return str(serializer.encode(value, size_warning=None))


def sdk_decode(blob: str) -> Any:
    return serializer.decode(blob, codec="avro")


# ---------------------------------------------------------------------------
# fastavro with our own tagging of the Value union (the datum after the 10-byte header)


def to_datum(value: Any) -> Dict[str, Any]:
    if value is None:
        return {"value": None}
    branch: Tuple[str, Dict[str, Any]]
    if isinstance(value, bool):
        branch = ("BooleanValue", {"boolean": value})
    elif isinstance(value, int):
        branch = ("LongValue", {"long": value})
    elif isinstance(value, float):
        branch = ("DoubleValue", {"double": value})
    elif isinstance(value, bytes):
        branch = ("BytesValue", {"bytes": value})
    elif isinstance(value, str):
        branch = ("StringValue", {"string": value})
    elif isinstance(value, list):
        branch = ("ArrayValue", {"items": [to_datum(item) for item in value]})
    else:
        branch = ("MapValue", {"entries": {key: to_datum(item) for key, item in value.items()}})
    return {"value": (NAMESPACE + branch[0], branch[1])}


def from_datum(datum: Dict[str, Any]) -> Any:
    tagged = datum["value"]
    if tagged is None:
        return None
    name, record = tagged
    field = {
        "BooleanValue": "boolean",
        "LongValue": "long",
        "DoubleValue": "double",
        "BytesValue": "bytes",
        "StringValue": "string",
    }.get(name[len(NAMESPACE) :])
    if field is not None:
        return record[field]
    if name == NAMESPACE + "ArrayValue":
        return [from_datum(item) for item in record["items"]]
    return {key: from_datum(item) for key, item in record["entries"].items()}


def fastavro_encode(value: Any) -> str:
    buffer = io.BytesIO()
    buffer.write(b"\xc3\x01" + bytes.fromhex(FINGERPRINT_HEX))
    fastavro.schemaless_writer(buffer, PARSED_SCHEMA, to_datum(value))
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def fastavro_decode(blob: str) -> Any:
    raw = base64.b64decode(blob, validate=True)
    assert raw[:10] == b"\xc3\x01" + bytes.fromhex(FINGERPRINT_HEX)
    buffer = io.BytesIO(raw[10:])
    datum = fastavro.schemaless_reader(buffer, PARSED_SCHEMA, return_record_name=True)
    assert buffer.read() == b""
    return from_datum(datum)


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", CORPUS, ids=lambda value: repr(value)[:40])
def test_same_bytes_as_the_sdk_and_each_decodes_the_other(value: Any) -> None:
    ours = encode(value)
    theirs = sdk_encode(value)
    assert ours == theirs
    assert strictly_equal(decode(theirs), value)
    assert strictly_equal(sdk_decode(ours), value)


@pytest.mark.parametrize("value", CORPUS, ids=lambda value: repr(value)[:40])
def test_same_bytes_as_raw_fastavro(value: Any) -> None:
    ours = encode(value)
    assert ours == fastavro_encode(value)
    assert strictly_equal(fastavro_decode(ours), value)


def test_fingerprint_is_crc64_avro_of_the_canonical_form() -> None:
    canonical = to_parsing_canonical_form(PARSED_SCHEMA)
    assert fingerprint(canonical, "CRC-64-AVRO") == FINGERPRINT_HEX
    # By hand: the Rabin CRC-64-AVRO, written little-endian.
    empty = 0xC15D213AA4D7A795
    table = []
    for byte in range(256):
        fp = byte
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in canonical.encode("utf-8"):
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    assert fp.to_bytes(8, "little").hex() == FINGERPRINT_HEX
    # and it is the published schema file, too
    published = load_fixture("sdk-python/schema/durable_workflow.protocol.Value.v1.avsc")
    assert to_parsing_canonical_form(parse_schema(published)) == canonical


@pytest.mark.parametrize(
    "value",
    [2**63, -(2**63) - 1, math.inf, math.nan, {1: "x"}, {"a": {None: 1}}, object(), {1, 2}],
    ids=repr,
)
def test_same_refusals_as_the_sdk(value: Any) -> None:
    with pytest.raises(PayloadEncodeError) as ours:
        encode(value)
    with pytest.raises((TypeError, ValueError)) as theirs:
        sdk_encode(value)
    assert str(theirs.value).startswith(ours.value.reason + ":")


def test_same_malformed_frame_verdicts_as_the_sdk() -> None:
    golden = load_fixture("sdk-python/schema/avro-value-v1-golden.json")
    assert golden["malformed_frames"]
    for case in golden["malformed_frames"]:
        with pytest.raises(PayloadDecodeError) as ours:
            decode(case["wire_base64"])
        with pytest.raises(ValueError) as theirs:
            sdk_decode(case["wire_base64"])
        assert ours.value.reason == case["error"], case["name"]
        assert str(theirs.value).startswith(case["error"]), case["name"]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.binary(max_size=32)
    | st.text(max_size=32),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None)
@given(_values)
def test_property_same_bytes_as_the_sdk(value: Any) -> None:
    blob = encode(value)
    assert blob == sdk_encode(value)
    assert strictly_equal(sdk_decode(blob), value)

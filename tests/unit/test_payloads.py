"""The Avro Value codec on every Python kind, its refusals and its decode errors."""

from __future__ import annotations

import base64
import datetime
import enum
import math
import struct
from collections import OrderedDict
from typing import Any

import pytest

from sync_worker.errors import PayloadDecodeError, PayloadEncodeError, PayloadError, UnsupportedPayloadCodec
from sync_worker.payloads import (
    FINGERPRINT_HEX,
    decode,
    decode_arguments,
    decode_bytes,
    decode_envelope,
    encode,
    encode_bytes,
    envelope,
    is_envelope,
)
from tests._values import strictly_equal

HEADER = b"\xc3\x01" + bytes.fromhex(FINGERPRINT_HEX)
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def datum(value: Any) -> bytes:
    data = encode_bytes(value)
    assert data[:10] == HEADER
    return data[10:]


def blob_of(datum_bytes: bytes) -> str:
    return base64.b64encode(HEADER + datum_bytes).decode("ascii")




# ---------------------------------------------------------------------------
# Kinds


@pytest.mark.parametrize(
    ("value", "expected_datum"),
    [
        (None, b"\x00"),
        (False, b"\x02\x00"),
        (True, b"\x02\x01"),
        (0, b"\x04\x00"),
        (-1, b"\x04\x01"),
        (1, b"\x04\x02"),
        (-64, b"\x04\x7f"),
        (64, b"\x04\x80\x01"),
        (INT64_MAX, b"\x04" + b"\xfe" + b"\xff" * 8 + b"\x01"),
        (INT64_MIN, b"\x04" + b"\xff" * 9 + b"\x01"),
        (1.5, b"\x06" + struct.pack("<d", 1.5)),
        (-0.0, b"\x06" + b"\x00" * 7 + b"\x80"),
        (b"", b"\x08\x00"),
        (b"\x00\xff", b"\x08\x04\x00\xff"),
        ("", b"\x0a\x00"),
        ("é", b"\x0a\x04\xc3\xa9"),
        ("😀", b"\x0a\x08\xf0\x9f\x98\x80"),
        ([], b"\x0c\x00"),
        ([None, 1], b"\x0c\x04\x00\x04\x02\x00"),
        ({}, b"\x0e\x00"),
        ({"a": None}, b"\x0e\x02\x02a\x00\x00"),
    ],
    ids=repr,
)
def test_each_kind_has_its_avro_datum_and_round_trips(value: Any, expected_datum: bytes) -> None:
    assert datum(value) == expected_datum
    assert strictly_equal(decode(encode(value)), value)
    assert strictly_equal(decode_bytes(encode_bytes(value)), value)


def test_bool_is_not_encoded_as_long() -> None:
    assert decode(encode(True)) is True
    assert type(decode(encode(1))) is int


def test_negative_zero_keeps_its_sign() -> None:
    assert math.copysign(1.0, decode(encode(-0.0))) == -1.0


def test_tuple_and_bytearray_encode_as_list_and_bytes() -> None:
    assert encode((1, "a")) == encode([1, "a"])
    assert decode(encode(bytearray(b"\x01\x02"))) == b"\x01\x02"


def test_int_and_dict_subclasses_encode_as_their_base_kind() -> None:
    class Level(enum.IntEnum):
        HIGH = 3

    value = OrderedDict([("level", Level.HIGH)])
    assert encode(value) == encode({"level": 3})
    assert strictly_equal(decode(encode(value)), {"level": 3})


def test_str_enum_encodes_its_value_like_the_sdk() -> None:
    # A str subclass is a string: its characters go on the wire, not its __str__ rendering
    # (the published SDK writes "red" here; Python 3.11 renders str(Colour.RED) as "Colour.RED").
    class Colour(str, enum.Enum):
        RED = "red"

    assert encode(Colour.RED) == encode("red")
    assert encode({"colour": Colour.RED}) == encode({"colour": "red"})


def test_surrogate_pairs_round_trip_and_lone_surrogates_are_refused() -> None:
    text = "astral \U0001f600 \u4e16"
    assert decode(encode(text)) == text
    with pytest.raises(PayloadEncodeError) as raised:
        encode({"bad": "x\ud800y"})
    assert raised.value.path == "$.bad"


def test_nested_structures_round_trip_in_order() -> None:
    value = {"z": [1, 2.5, {"deep": [b"\x00", None, True]}], "a": {}, "m": {"0": "zero", "01": "one"}}
    decoded = decode(encode(value))
    assert strictly_equal(decoded, value)
    assert list(decoded) == ["z", "a", "m"]


# ---------------------------------------------------------------------------
# Encode refusals


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, 2**100, [0, {"n": -(2**64)}]])
def test_integer_overflow(value: Any) -> None:
    with pytest.raises(PayloadEncodeError) as raised:
        encode(value)
    assert raised.value.reason == "integer_overflow"
    assert isinstance(raised.value, PayloadError) and isinstance(raised.value, ValueError)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_floats_are_refused(value: float) -> None:
    with pytest.raises(PayloadEncodeError) as raised:
        encode({"x": [value]})
    assert raised.value.reason == "non_finite_float"
    assert raised.value.path == "$.x[0]"


@pytest.mark.parametrize("key", [1, None, b"k", 1.5, ("a",)])
def test_non_string_map_keys_are_refused(key: Any) -> None:
    with pytest.raises(PayloadEncodeError) as raised:
        encode({"outer": {key: 1}})
    assert raised.value.reason == "invalid_map_key"
    assert raised.value.path == "$.outer"


def test_unsupported_type_names_its_path() -> None:
    when = datetime.datetime(2026, 1, 1)
    with pytest.raises(PayloadEncodeError) as raised:
        encode({"items": [0, 1, 2, {"when": when}]})
    assert str(raised.value) == "$.items[3].when: datetime is not a payload value"
    assert raised.value.reason == "unsupported_value_type"
    assert raised.value.path == "$.items[3].when"


@pytest.mark.parametrize("value", [object(), {1, 2}, frozenset(), complex(1, 2), datetime.date(2026, 1, 1)])
def test_other_unsupported_types(value: Any) -> None:
    with pytest.raises(PayloadEncodeError) as raised:
        encode(value)
    assert raised.value.reason == "unsupported_value_type"
    assert raised.value.path == "$"


def test_non_identifier_keys_are_quoted_in_the_path() -> None:
    with pytest.raises(PayloadEncodeError) as raised:
        encode({"a b": [{"x-y": object()}]})
    assert raised.value.path == "$['a b'][0]['x-y']"


def test_self_containing_value_is_refused() -> None:
    loop: Any = []
    loop.append(loop)
    with pytest.raises(PayloadEncodeError):
        encode(loop)


# ---------------------------------------------------------------------------
# Decode errors


@pytest.mark.parametrize("blob", ["not base64!", "wwHioz3/VYAiNwA", "wwHioz3/VYAiNwA=\n", " wwHioz3/VYAiNwA="])
def test_non_strict_base64_is_refused(blob: str) -> None:
    with pytest.raises(PayloadDecodeError) as raised:
        decode(blob)
    assert raised.value.reason == "invalid_payload_framing"


@pytest.mark.parametrize("text", ['{"a": 1}', "[1, 2]", '"hello"'])
def test_json_looking_text_gets_a_json_diagnostic(text: str) -> None:
    with pytest.raises(PayloadDecodeError) as raised:
        decode(text)
    assert raised.value.reason == "invalid_payload_framing"
    assert "JSON" in str(raised.value)


@pytest.mark.parametrize("cut", [1, 2, 5])
def test_truncated_datum_is_refused(cut: int) -> None:
    data = encode_bytes({"key": ["value", 12345678, 1.25]})
    with pytest.raises(PayloadDecodeError) as raised:
        decode_bytes(data[:-cut])
    assert raised.value.reason == "invalid_payload_framing"


def test_trailing_bytes_are_refused() -> None:
    with pytest.raises(PayloadDecodeError) as raised:
        decode(blob_of(datum("x") + b"\x00"))
    assert raised.value.reason == "invalid_payload_framing"
    assert "trailing" in str(raised.value)


def test_wrong_fingerprint_and_wrong_magic() -> None:
    wrong_fingerprint = b"\xc3\x01" + b"\x00" * 8 + b"\x00"
    with pytest.raises(PayloadDecodeError) as raised:
        decode_bytes(wrong_fingerprint)
    assert raised.value.reason == "unsupported_payload_schema"
    with pytest.raises(PayloadDecodeError) as raised:
        decode_bytes(b"\xc3\x02" + HEADER[2:] + b"\x00")
    assert raised.value.reason == "invalid_payload_framing"


@pytest.mark.parametrize(
    "bad_datum",
    [
        b"\x10",  # union branch 8 does not exist
        b"\x02\x02",  # boolean byte 2
        b"\x04" + b"\xff" * 10 + b"\x01",  # varint longer than 10 bytes
        b"\x0a\x02\xff",  # invalid UTF-8
        b"\x0a\x01",  # negative string length
        b"\x0c\x7e\x00",  # array count larger than the remaining bytes
    ],
)
def test_malformed_datums_are_refused(bad_datum: bytes) -> None:
    with pytest.raises(PayloadDecodeError) as raised:
        decode(blob_of(bad_datum))
    assert raised.value.reason == "invalid_payload_framing"


def test_blocked_arrays_with_negative_counts_decode() -> None:
    # A writer may split an array into blocks and give a negative count followed by a byte size.
    items = b"\x04\x02" + b"\x04\x04"
    blocked = b"\x0c" + b"\x03" + bytes([len(items) * 2]) + items + b"\x02\x04\x06\x00"
    assert decode(blob_of(blocked)) == [1, 2, 3]


def test_non_string_blob_is_refused() -> None:
    with pytest.raises(PayloadDecodeError):
        decode(b"wwHioz3/VYAiNwA=")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Envelopes and arguments


def test_envelope_and_is_envelope() -> None:
    wrapped = envelope(["world"])
    assert wrapped == {"codec": "avro", "blob": "wwHioz3/VYAiNwwCCgp3b3JsZAA="}
    assert is_envelope(wrapped)
    assert not is_envelope({"codec": "json", "blob": "x"})
    assert not is_envelope({"codec": "avro"})
    assert not is_envelope("wwHioz3/VYAiNwA=")
    assert decode_envelope(wrapped) == ["world"]
    assert decode_envelope(wrapped["blob"], codec="avro") == ["world"]


@pytest.mark.parametrize(
    ("payload", "codec"),
    [
        ({"codec": "json", "blob": "eyJhIjoxfQ=="}, None),
        ({"codec": None, "blob": "wwHioz3/VYAiNwA="}, None),
        ({"blob": "wwHioz3/VYAiNwA="}, None),
        ("wwHioz3/VYAiNwA=", None),
        ("wwHioz3/VYAiNwA=", "json"),
    ],
)
def test_non_avro_codecs_are_refused(payload: Any, codec: Any) -> None:
    with pytest.raises(UnsupportedPayloadCodec) as raised:
        decode_envelope(payload, codec=codec)
    assert raised.value.reason == "unsupported_payload_codec"


def test_decode_envelope_refuses_other_shapes() -> None:
    with pytest.raises(PayloadDecodeError):
        decode_envelope(42)


def test_decode_arguments() -> None:
    assert decode_arguments(None) == []
    assert decode_arguments(envelope(None)) == []
    assert decode_arguments(envelope(["a", 1])) == ["a", 1]
    assert decode_arguments(envelope([])) == []
    assert decode_arguments(envelope("solo")) == ["solo"]
    assert decode_arguments(envelope({"k": 1})) == [{"k": 1}]
    assert decode_arguments(encode([1, 2]), codec="avro") == [1, 2]
    with pytest.raises(UnsupportedPayloadCodec):
        decode_arguments(encode([1]))


# ---------------------------------------------------------------------------
# Property-based round trip

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.binary(max_size=64)
    | st.text(max_size=64)
)
_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None)
@given(_values)
def test_property_round_trip(value: Any) -> None:
    blob = encode(value)
    decoded = decode(blob)
    assert strictly_equal(decoded, value)
    assert encode(decoded) == blob


def test_the_no_argument_and_none_shortcuts_agree_with_the_codec() -> None:
    for value in ([], None):
        blob = encode(value)
        assert decode_arguments({"codec": "avro", "blob": blob}) == []
        assert decode_arguments(blob, codec="avro") == []
    assert envelope(None) == {"codec": "avro", "blob": encode(None)} and decode_envelope(envelope(None)) is None
    first, second = envelope(None), envelope(None)
    assert first is not second  # a fresh dict each time: a caller may change its own
    # the shortcut keeps the codec check and tolerates odd blobs
    with pytest.raises(UnsupportedPayloadCodec):
        decode_arguments({"codec": "json", "blob": encode([])})
    with pytest.raises(PayloadDecodeError):
        decode_arguments({"codec": "avro", "blob": ["not", "a", "string"]})
    assert decode_arguments({"codec": "avro", "blob": encode([1, "a"])}) == [1, "a"]

"""The Durable Workflow payload codec: Avro ``durable_workflow.protocol.Value``, nothing else.

Every business payload on the wire is an envelope ``{"codec": "avro", "blob": <base64>}``
whose blob is an Avro *single-object encoding*: the two magic bytes ``C3 01``, the
8-byte little-endian CRC-64-AVRO fingerprint of the fixed schema, then the binary datum.
The schema is one recursive record with a union of eight branches::

    0 null   1 boolean   2 long   3 double   4 bytes   5 string   6 array<Value>   7 map<Value>

This module encodes and decodes that datum by hand. The schema is tiny and fixed, and
walking Python values directly avoids building the tagged intermediate structure a generic
Avro library needs (``bench/payload_codec.py`` measures it against fastavro; the tests
cross-check every vector with fastavro). Pure code: no I/O, no runtime imports.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import sys
from typing import Any, Dict, List, Optional, Union

from .errors import PayloadDecodeError, PayloadEncodeError, UnsupportedPayloadCodec

__all__ = [
    "CODEC",
    "FINGERPRINT_HEX",
    "SCHEMA_JSON",
    "PayloadDecodeError",
    "PayloadEncodeError",
    "PayloadValue",
    "UnsupportedPayloadCodec",
    "decode",
    "decode_arguments",
    "decode_bytes",
    "decode_envelope",
    "encode",
    "encode_bytes",
    "envelope",
    "is_envelope",
]

CODEC = "avro"
FINGERPRINT_HEX = "e2a33dff55802237"
_HEADER = b"\xc3\x01" + bytes.fromhex(FINGERPRINT_HEX)
_HEADER_LEN = len(_HEADER)

#: The schema, exactly as published (its Parsing Canonical Form has the fingerprint above).
SCHEMA_JSON = (
    '{"type":"record","name":"Value","namespace":"durable_workflow.protocol","fields":[{"name":"value",'
    '"type":["null",{"type":"record","name":"BooleanValue","fields":[{"name":"boolean","type":"boolean"}]},'
    '{"type":"record","name":"LongValue","fields":[{"name":"long","type":"long"}]},'
    '{"type":"record","name":"DoubleValue","fields":[{"name":"double","type":"double"}]},'
    '{"type":"record","name":"BytesValue","fields":[{"name":"bytes","type":"bytes"}]},'
    '{"type":"record","name":"StringValue","fields":[{"name":"string","type":"string"}]},'
    '{"type":"record","name":"ArrayValue","fields":[{"name":"items","type":{"type":"array","items":"Value"}}]},'
    '{"type":"record","name":"MapValue","fields":[{"name":"entries","type":{"type":"map","values":"Value"}}]}]}]}'
)

PayloadValue = Union[None, bool, int, float, bytes, str, List[Any], Dict[str, Any]]

_A2B_STRICT = sys.version_info >= (3, 11)
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_pack_double = struct.Struct("<d").pack
_unpack_double = struct.Struct("<d").unpack_from


class _Located(Exception):
    """Internal: an encode error on its way out, collecting its path as the stack unwinds."""

    def __init__(self, reason: str, what: str) -> None:
        super().__init__(what)
        self.reason = reason
        self.what = what
        self.parts: List[str] = []


# ---------------------------------------------------------------------------
# Encoding


def _varint(out: bytearray, n: int) -> None:
    # n is the zig-zag (non-negative) form.
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(out: bytearray, v: int) -> None:
    _varint(out, (v << 1) ^ (v >> 63))


def _write_str(out: bytearray, s: str) -> None:
    try:
        data = s.encode("utf-8")
    except UnicodeEncodeError:
        raise _Located("unsupported_value_type", "string is not valid UTF-8 (lone surrogate)") from None
    _zigzag(out, len(data))
    out += data


def _write(out: bytearray, value: Any) -> None:
    kind = type(value)
    if kind is str:
        out.append(10)  # branch 5
        _write_str(out, value)
    elif kind is int:
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise _Located("integer_overflow", f"integer {value} does not fit a signed 64-bit long")
        out.append(4)  # branch 2
        _zigzag(out, value)
    elif value is None:
        out.append(0)
    elif kind is bool:
        out.append(2)
        out.append(1 if value else 0)
    elif kind is dict:
        _write_map(out, value)
    elif kind is list or kind is tuple:
        _write_array(out, value)
    elif kind is float:
        if not math.isfinite(value):
            raise _Located("non_finite_float", f"float {value!r} is not finite")
        out.append(6)
        out += _pack_double(value)
    elif kind is bytes or kind is bytearray or kind is memoryview:
        data = bytes(value)
        out.append(8)
        _zigzag(out, len(data))
        out += data
    else:
        _write_subclass(out, value)


def _write_subclass(out: bytearray, value: Any) -> None:
    # Subclasses of the plain kinds (str enums, OrderedDict, ...) encode as their base kind.
    if isinstance(value, bool):
        _write(out, bool(value))
    elif isinstance(value, int):
        _write(out, int(value))
    elif isinstance(value, float):
        _write(out, float(value))
    elif isinstance(value, str):
        _write(out, str.__str__(value))  # the characters, not an enum's display text
    elif isinstance(value, dict):
        _write_map(out, value)
    elif isinstance(value, (list, tuple)):
        _write_array(out, value)
    elif isinstance(value, (bytes, bytearray)):
        _write(out, bytes(value))
    else:
        raise _Located("unsupported_value_type", f"{type(value).__name__} is not a payload value")


def _write_array(out: bytearray, items: Any) -> None:
    out.append(12)  # branch 6
    if items:
        _zigzag(out, len(items))
        for index, item in enumerate(items):
            try:
                _write(out, item)
            except _Located as exc:
                exc.parts.append(f"[{index}]")
                raise
    out.append(0)


def _write_map(out: bytearray, entries: Any) -> None:
    out.append(14)  # branch 7
    if entries:
        _zigzag(out, len(entries))
        for key, item in entries.items():
            if not isinstance(key, str):
                located = _Located("invalid_map_key", f"map key {key!r} is not a string")
                raise located
            _write_str(out, key)
            try:
                _write(out, item)
            except _Located as exc:
                exc.parts.append(f".{key}" if key.isidentifier() else f"[{key!r}]")
                raise
    out.append(0)


def encode_bytes(value: Any) -> bytes:
    """Encode a Python value as single-object Avro bytes (header + datum)."""
    out = bytearray(_HEADER)
    try:
        _write(out, value)
    except _Located as exc:
        path = "$" + "".join(reversed(exc.parts))
        raise PayloadEncodeError(f"{path}: {exc.what}", reason=exc.reason, path=path) from None
    except RecursionError:
        raise PayloadEncodeError(
            "$: value is nested too deeply (or contains itself)", reason="unsupported_value_type", path="$"
        ) from None
    return bytes(out)


def encode(value: Any) -> str:
    """Encode a Python value as a base64 blob string."""
    return base64.b64encode(encode_bytes(value)).decode("ascii")


def envelope(value: Any) -> Dict[str, str]:
    """Encode a value as the wire envelope ``{"codec": "avro", "blob": ...}``."""
    if value is None:  # what most activities return: its blob is a constant
        return {"codec": CODEC, "blob": _NONE_BLOB}
    return {"codec": CODEC, "blob": encode(value)}


# ---------------------------------------------------------------------------
# Decoding


class _Frame(Exception):
    """Internal: malformed datum."""


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise _Frame("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise _Frame("varint longer than 10 bytes")
    if result >> 64:
        raise _Frame("varint exceeds 64 bits")
    return (result >> 1) ^ -(result & 1), pos


def _read_sized(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _read_long(data, pos)
    if size < 0 or pos + size > len(data):
        raise _Frame("truncated bytes or string")
    return data[pos : pos + size], pos + size


def _read_text(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _read_sized(data, pos)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError:
        raise _Frame("string is not valid UTF-8") from None


def _read(data: bytes, pos: int) -> tuple[Any, int]:
    if pos >= len(data):
        raise _Frame("truncated union index")
    branch = data[pos]
    pos += 1
    if branch == 10:
        return _read_text(data, pos)
    if branch == 4:
        return _read_long(data, pos)
    if branch == 0:
        return None, pos
    if branch == 2:
        if pos >= len(data):
            raise _Frame("truncated boolean")
        flag = data[pos]
        if flag > 1:
            raise _Frame("boolean byte is neither 0 nor 1")
        return flag == 1, pos + 1
    if branch == 14:
        return _read_map(data, pos)
    if branch == 12:
        return _read_array(data, pos)
    if branch == 6:
        if pos + 8 > len(data):
            raise _Frame("truncated double")
        number = _unpack_double(data, pos)[0]
        if not math.isfinite(number):
            raise _Frame("double is not finite")
        return number, pos + 8
    if branch == 8:
        return _read_sized(data, pos)
    raise _Frame(f"unknown union branch byte {branch}")


def _read_block_count(data: bytes, pos: int) -> tuple[int, int]:
    count, pos = _read_long(data, pos)
    if count < 0:  # a negative count is followed by the block's byte size
        _, pos = _read_long(data, pos)
        count = -count
    if count > len(data) - pos:
        raise _Frame("block count exceeds the remaining bytes")
    return count, pos


def _read_array(data: bytes, pos: int) -> tuple[Any, int]:
    items: List[Any] = []
    while True:
        count, pos = _read_block_count(data, pos)
        if count == 0:
            return items, pos
        for _ in range(count):
            item, pos = _read(data, pos)
            items.append(item)


def _read_map(data: bytes, pos: int) -> tuple[Any, int]:
    entries: Dict[str, Any] = {}
    while True:
        count, pos = _read_block_count(data, pos)
        if count == 0:
            return entries, pos
        for _ in range(count):
            key, pos = _read_text(data, pos)
            entries[key], pos = _read(data, pos)


def decode_bytes(data: bytes) -> Any:
    """Decode single-object Avro bytes (header + datum) into a Python value."""
    if len(data) <= _HEADER_LEN or data[:2] != b"\xc3\x01":
        raise PayloadDecodeError(
            "invalid_payload_framing: not an Avro single-object payload (missing C3 01 header or datum)",
            reason="invalid_payload_framing",
        )
    if data[:_HEADER_LEN] != _HEADER:
        raise PayloadDecodeError(
            f"unsupported_payload_schema: fingerprint {data[2:_HEADER_LEN].hex()} is not the "
            f"durable_workflow.protocol.Value schema ({FINGERPRINT_HEX})",
            reason="unsupported_payload_schema",
        )
    try:
        value, pos = _read(data, _HEADER_LEN)
    except _Frame as exc:
        raise PayloadDecodeError(f"invalid_payload_framing: {exc}", reason="invalid_payload_framing") from None
    except RecursionError:
        raise PayloadDecodeError(
            "invalid_payload_framing: datum nested too deeply", reason="invalid_payload_framing"
        ) from None
    if pos != len(data):
        raise PayloadDecodeError(
            f"invalid_payload_framing: {len(data) - pos} trailing bytes after the datum",
            reason="invalid_payload_framing",
        )
    return value


def _strict_b64decode(blob: str) -> bytes:
    # binascii's strict mode (3.11+) validates in C; b64decode(validate=True) runs a regex over
    # the whole blob first, which dominates the decode of large payloads.
    if _A2B_STRICT:
        return binascii.a2b_base64(blob, strict_mode=True)  # type: ignore[call-arg,unused-ignore]
    return base64.b64decode(blob, validate=True)


def decode(blob: str) -> Any:
    """Decode a base64 blob string into a Python value."""
    if not isinstance(blob, str):
        raise PayloadDecodeError(
            f"invalid_payload_framing: blob must be a base64 string, not {type(blob).__name__}",
            reason="invalid_payload_framing",
        )
    try:
        data = _strict_b64decode(blob)
    except (binascii.Error, ValueError):
        head = blob.lstrip()[:1]
        hint = " (it looks like JSON: JSON is the HTTP transport, not a payload codec)" if head in (
            "{", "[", '"') else ""
        raise PayloadDecodeError(
            f"invalid_payload_framing: blob is not strict base64{hint}", reason="invalid_payload_framing"
        ) from None
    return decode_bytes(data)


def is_envelope(candidate: object) -> bool:
    """Whether ``candidate`` is shaped like an Avro envelope (codec and blob keys)."""
    return isinstance(candidate, dict) and candidate.get("codec") == CODEC and isinstance(
        candidate.get("blob"), str)


def decode_envelope(payload: object, *, codec: Optional[str] = None) -> Any:
    """Decode an envelope, or a bare blob whose codec comes from a sibling field.

    ``payload`` is ``{"codec": "avro", "blob": ...}`` or a blob string; for a bare blob,
    ``codec`` is the sibling ``payload_codec`` (it must be ``"avro"``). JSON-tagged,
    null and missing codecs are refused with :class:`UnsupportedPayloadCodec`.
    """
    if isinstance(payload, dict):
        if "codec" not in payload or payload.get("codec") != CODEC:
            raise UnsupportedPayloadCodec(payload.get("codec"))
        if "blob" not in payload and "external_storage" in payload:
            raise _unread_reference(payload)
        return decode(payload.get("blob"))  # type: ignore[arg-type]
    if isinstance(payload, str):
        if codec != CODEC:
            raise UnsupportedPayloadCodec(codec)
        return decode(payload)
    raise PayloadDecodeError(
        f"invalid_payload_framing: expected an envelope object or blob string, not {type(payload).__name__}",
        reason="invalid_payload_framing",
    )


def _unread_reference(payload: Dict[str, Any]) -> Exception:
    """The typed error of a ``{codec, external_storage}`` envelope that reached a decoder unread."""
    error = getattr(payload, "error", None)  # an UnresolvedReference: its fetch failed
    if error is not None:
        return error.copy()  # type: ignore[no-any-return]
    from .errors.external_payloads import ExternalPayloadUnsupported

    uri = payload.get("external_storage", {}).get("uri") if isinstance(payload.get("external_storage"), dict) \
        else None
    return ExternalPayloadUnsupported(
        "external_payload_unsupported: this payload is stored externally and no external_storage driver is "
        "configured (Client(external_storage=...) / Worker(external_storage=...); docs/external-storage.md)",
        uri=uri)


def decode_arguments(payload: object, *, codec: Optional[str] = None) -> List[Any]:
    """Decode an argument-list payload: ``None`` gives ``[]``, a scalar ``[x]``."""
    if payload is None:
        return []
    if isinstance(payload, dict):
        blob = payload.get("blob")
        if type(blob) is str and blob in _NO_ARGUMENT_BLOBS and payload.get("codec") == CODEC:
            return []  # no arguments (an empty list or null): the commonest payload, decoded once at import
    value = decode_envelope(payload, codec=codec)
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


#: The blob of ``None``, and the blobs that decode to no arguments (``[]``, ``None``).
_NONE_BLOB = encode(None)
_NO_ARGUMENT_BLOBS = frozenset((_NONE_BLOB, encode([])))

"""JSON response bodies, with blocks that are the same in every response encoded once.

Every worker-plane poll answer carries the ~780-byte ``server_capabilities`` block, which only
changes with the server's configuration. :class:`PreEncoded` is a dict that keeps its own JSON
text; :func:`encode_body` splices such top-level values in instead of encoding them again.
Treat a :class:`PreEncoded` as read-only (its text is taken when it is built).
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any, Callable, Dict, List, Mapping, Tuple, cast

__all__ = ["PreEncoded", "compact_encoder", "decode_stored", "encode_body"]

_SEPARATORS = (",", ":")


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def compact_encoder(ensure_ascii: bool) -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=...)``, with CPython's C encoder built once.

    ``JSONEncoder.encode`` builds the C encoder again on every call and, with its circular-reference
    check, notes every container it enters in a dict: ~12% of the time of encoding a stored row.
    What the server encodes is a tree it built (decoded JSON, literals), so there is no cycle to
    check for (a cycle would end in ``RecursionError`` instead of ``ValueError``).
    """
    escape = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    make = getattr(json.encoder, "c_make_encoder", None)  # not in the typeshed stubs
    if make is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(separators=_SEPARATORS, ensure_ascii=ensure_ascii, check_circular=False).encode
    encoder = make(None, _refuse, escape, None, ":", ",", False, False, True)
    join = "".join

    def encode(value: Any) -> str:
        return join(encoder(value, 0))

    return encode


_dumps = compact_encoder(ensure_ascii=False)


#: The scanner ``json.loads`` ends in, called directly: a stored document is compact JSON written by
#: the store (no surrounding whitespace), so the per-call checks and whitespace matches around it
#: are skipped; any other text goes through ``json.loads`` (same result, same errors).
_scan: Callable[[str, int], Tuple[Any, int]] = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))


def decode_stored(text: str) -> Dict[str, Any]:
    """A JSON object the store wrote (``json.loads(text)``, about a third cheaper on compact text)."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:  # not a JSON value at offset 0 (e.g. leading whitespace): the slow path
        end = -1
    if end != len(text):
        value = json.loads(text)
    return cast("Dict[str, Any]", value)


class PreEncoded(Dict[str, Any]):
    """A read-only JSON object that carries its own encoding."""

    def __init__(self, value: Mapping[str, Any]) -> None:
        super().__init__(value)
        self.encoded = _dumps(value)


def encode_body(body: Any) -> bytes:
    """``body`` as compact UTF-8 JSON; top-level :class:`PreEncoded` values are spliced in as is."""
    if isinstance(body, dict) and any(isinstance(v, PreEncoded) for v in body.values()):
        plain = {k: v for k, v in body.items() if not isinstance(v, PreEncoded)}
        spliced: List[str] = [f"{_dumps(str(k))}:{v.encoded}" for k, v in body.items() if isinstance(v, PreEncoded)]
        head = _dumps(plain)
        text = "{" + ",".join(spliced) + "}" if head == "{}" else head[:-1] + "," + ",".join(spliced) + "}"
        return text.encode("utf-8")
    return _dumps(body).encode("utf-8")

"""JSON response bodies, with parts whose JSON text is known already spliced in, not encoded again.

Every worker-plane poll answer carries the ~780-byte ``server_capabilities`` block, which only
changes with the server's configuration. :class:`PreEncoded` is a dict that keeps its own JSON
text; :func:`encode_body` splices such top-level values in instead of encoding them again.
Treat a :class:`PreEncoded` as read-only (its text is taken when it is built).

History answers carry events as the store wrote them: a :class:`StoredList` holds their JSON
text, which :func:`encode_body` splices in (anywhere in the body) where it is the very text the
encoder would write for the decoded events; see :meth:`StoredList.json`.
"""

from __future__ import annotations

import json
import json.scanner
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Sequence, Tuple, Union, cast, overload

__all__ = ["PreEncoded", "StoredList", "compact_encoder", "decode_stored", "encode_body"]

_SEPARATORS = (",", ":")


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def compact_encoder(ensure_ascii: bool, default: Callable[[Any], Any] = _refuse) -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=...)``, with CPython's C encoder built once.

    ``JSONEncoder.encode`` builds the C encoder again on every call and, with its circular-reference
    check, notes every container it enters in a dict: ~12% of the time of encoding a stored row.
    What the server encodes is a tree it built (decoded JSON, literals), so there is no cycle to
    check for (a cycle would end in ``RecursionError`` instead of ``ValueError``).
    """
    escape = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    make = getattr(json.encoder, "c_make_encoder", None)  # not in the typeshed stubs
    if make is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(separators=_SEPARATORS, ensure_ascii=ensure_ascii, check_circular=False,
                                default=default).encode
    encoder = make(None, default, escape, None, ":", ",", False, False, True)
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


class StoredList(Sequence[Dict[str, Any]]):
    """Documents as the store wrote them (their JSON text, e.g. a page of a run's history), read-only.

    In an answer body :func:`encode_body` writes them as a JSON array without decoding them; in
    Python they read as a sequence of the decoded documents (each item decoded when it is read).
    """

    __slots__ = ("texts",)

    def __init__(self, texts: List[str]) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, index: int) -> Dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> StoredList: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Dict[str, Any], StoredList]:
        if isinstance(index, slice):
            return StoredList(self.texts[index])
        return decode_stored(self.texts[index])

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return map(decode_stored, self.texts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredList):
            return self.texts == other.texts
        return isinstance(other, (list, tuple)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredList({list(self)!r})"

    def json(self) -> str:
        """The array as :func:`encode_body` writes it: ``_dumps(list(self))``, mostly without decoding.

        The store writes ASCII-only JSON (``ensure_ascii=True``), answers UTF-8 (``ensure_ascii=False``)
        with the same separators and number forms. The two encodings of a document differ only in
        strings holding a character the ASCII one writes as a ``\\uXXXX`` escape (any non-ASCII one,
        DEL, a control character without a short escape); a text without the two characters ``\\u``
        has none, so it is what the answer's encoder would write for its decoded document. Others
        (unicode, such escapes, or a literal backslash before a ``u``) are decoded and encoded again.
        """
        joined = ",".join(self.texts)
        if "\\u" in joined:
            joined = ",".join([text if "\\u" not in text else _dumps(decode_stored(text)) for text in self.texts])
        return "[" + joined + "]"


class PreEncoded(Dict[str, Any]):
    """A read-only JSON object that carries its own encoding."""

    def __init__(self, value: Mapping[str, Any]) -> None:
        super().__init__(value)
        self.encoded = _dumps(value)


# -- answers ---------------------------------------------------------------------------------------
#: What the answer encoder writes in place of a :class:`StoredList`, then replaced by its text: a string
#: no answer is expected to hold (a NUL-framed word). A body that does hold it is encoded the plain way
#: (every :class:`StoredList` decoded): the splice must meet exactly one mark per list it saw.
_MARK = "\x00sync-worker-stored-json\x00"
_found = threading.local()  # the lists met in the encoding running in this thread, in order


def _stored_mark(value: Any) -> Any:
    if isinstance(value, StoredList):
        _found.lists.append(value)
        return _MARK
    return _refuse(value)


def _stored_decoded(value: Any) -> Any:
    if isinstance(value, StoredList):
        return list(value)
    return _refuse(value)


_dumps_marked = compact_encoder(ensure_ascii=False, default=_stored_mark)
_dumps_decoded = compact_encoder(ensure_ascii=False, default=_stored_decoded)
_MARK_JSON = _dumps(_MARK)


def _answer_text(value: Any) -> str:
    """``_dumps(value)`` with every :class:`StoredList` as the array of its documents."""
    lists: List[StoredList] = []
    _found.lists = lists
    text = _dumps_marked(value)
    if not lists:
        return text
    parts = text.split(_MARK_JSON)
    if len(parts) != len(lists) + 1:  # the body holds the mark's text itself: no splice
        return _dumps_decoded(value)
    spliced = [parts[0]]
    for stored, after in zip(lists, parts[1:]):
        spliced.append(stored.json())
        spliced.append(after)
    return "".join(spliced)


def encode_body(body: Any) -> bytes:
    """``body`` as compact UTF-8 JSON; top-level :class:`PreEncoded` values are spliced in as is, and
    :class:`StoredList` values (at any depth) as the array of their documents."""
    if isinstance(body, dict) and any(isinstance(v, PreEncoded) for v in body.values()):
        plain = {k: v for k, v in body.items() if not isinstance(v, PreEncoded)}
        spliced: List[str] = [f"{_dumps(str(k))}:{v.encoded}" for k, v in body.items() if isinstance(v, PreEncoded)]
        head = _answer_text(plain)
        text = "{" + ",".join(spliced) + "}" if head == "{}" else head[:-1] + "," + ",".join(spliced) + "}"
        return text.encode("utf-8")
    return _answer_text(body).encode("utf-8")

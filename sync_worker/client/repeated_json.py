"""JSON objects whose large members come back byte for byte in every response, decoded once.

Every poll answer carries the server's ``server_capabilities`` block: about 1.8 KB of the ~2.7 KB
a no-op activity task's answer weighs, and three quarters of the CPU its JSON decoding takes
(``bench/worker_throughput.py``). The block only changes with the server's configuration, and
a worker reads capabilities from cluster info, never from a poll. :class:`RepeatedMembers`
decodes a top-level object member by member with the standard library's own C scanner, and a
named member whose text starts where the text of the last one decoded started is not decoded
again: its earlier value is reused.

That is exact, not a guess: a JSON object or array ends at its own closing bracket, so a value
that begins with the same complete text as before *is* that text and decodes to the same value.
Anything the member walk does not expect (not an object, a syntax error, trailing text) is
decoded by ``json`` as a whole instead, so errors and results are ``json``'s own.

A reused value is shared between the responses that carried it: treat it as read-only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, Iterable, Tuple

__all__ = ["RepeatedMembers"]

_DECODER = json.JSONDecoder()
_scan_once: Callable[[str, int], Tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_scanstring: Callable[[str, int], Tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_skip_ws = re.compile(r"[ \t\n\r]*").match  # JSON whitespace, as ``json.decoder`` skips it
_WHITESPACE = frozenset(" \t\n\r")


class _Unexpected(Exception):
    """The member walk met something it leaves to ``json``."""


class RepeatedMembers:
    """``json.loads`` of a top-level object, reusing the values of ``names`` members seen before."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = frozenset(names)
        #: name -> (the member's JSON text, its decoded value), the last seen per name
        self._seen: Dict[str, Tuple[str, Any]] = {}

    def loads(self, text: str) -> Any:
        try:
            return self._walk(text)
        except (_Unexpected, ValueError, StopIteration, IndexError):
            return _DECODER.decode(text)

    def _walk(self, text: str) -> Dict[str, Any]:
        # text[idx] past the end raises IndexError: the caller hands such text to json
        idx = _ws(text, 0)
        if text[idx] != "{":
            raise _Unexpected
        idx = _ws(text, idx + 1)
        result: Dict[str, Any] = {}
        seen, names = self._seen, self._names
        while True:
            if text[idx] != '"':
                raise _Unexpected  # includes "{}": json decodes it
            key, idx = _scanstring(text, idx + 1)
            if text[idx] == " ":  # json.dumps' default separators: one space
                idx += 1
            if text[idx] in _WHITESPACE:
                idx = _ws(text, idx)
            if text[idx] != ":":
                raise _Unexpected
            idx += 1
            if text[idx] == " ":  # json.dumps' default separators: one space
                idx += 1
            if text[idx] in _WHITESPACE:
                idx = _ws(text, idx)
            known = seen.get(key)
            if known is not None and text.startswith(known[0], idx):
                value = known[1]
                idx += len(known[0])
            else:
                value, end = _scan_once(text, idx)
                if key in names and text[idx] in "{[":  # self-delimiting values only
                    seen[key] = (text[idx:end], value)
                idx = end
            result[key] = value
            if text[idx] == " ":  # json.dumps' default separators: one space
                idx += 1
            if text[idx] in _WHITESPACE:
                idx = _ws(text, idx)
            separator = text[idx]
            idx += 1
            if separator == "}":
                break
            if separator != ",":
                raise _Unexpected
            if text[idx] == " ":  # json.dumps' default separators: one space
                idx += 1
            if text[idx] in _WHITESPACE:
                idx = _ws(text, idx)
        idx = _ws(text, idx)  # trailing whitespace (idx may be the end of the text)
        if idx != len(text):
            raise _Unexpected
        return result


def _ws(text: str, idx: int) -> int:
    """The first index at or after ``idx`` that is not JSON whitespace (none, or one space, is the
    common case: compact JSON, or ``json.dumps``' default separators)."""
    if text[idx:idx + 1] not in _WHITESPACE:
        return idx
    if text[idx + 1:idx + 2] not in _WHITESPACE:
        return idx + 1
    return _skip_ws(text, idx).end()  # type: ignore[union-attr]  # "[...]*" always matches

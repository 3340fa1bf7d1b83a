"""Condition-wait predicate fingerprints (``condition_definition_fingerprint``).

The published SDK fingerprints a predicate as ``sha256`` over its module, qualname and
``repr`` of its code's argument counts, bytecode, constants and names. We send the same value,
so a wait one worker opened replays on the other (the SDK refuses a different fingerprint by
failing the workflow). Two of those inputs are unstable, and we only make those stable:

* a constant that is a code object (a generator expression, a nested lambda or
  comprehension) has a ``repr`` with its memory address: the SDK's fingerprint of such a
  predicate differs in every process. Ours describes the nested code by its name, arguments,
  bytecode, constants and names instead;
* a ``frozenset`` constant (``x in {"a", "b"}``) iterates in hash order, which changes with
  ``PYTHONHASHSEED``. Ours lists its members sorted.

For every other predicate the value is byte-equal to the SDK's.

The bytecode differs between CPython versions (3.9 to 3.13 all differ), so a run recorded
under one version reads a different fingerprint under another; a changed predicate does too.
Replay therefore never fails on a fingerprint: a wait is matched by its recorded position and
decided by its predicate over the same applied messages (``recorded``), and a difference is
logged once (:func:`fingerprint_mismatch`). ``condition_key``, which the author chooses, is
still checked strictly: give long-lived waits a key.
"""

from __future__ import annotations

import hashlib
import logging
from types import CodeType
from typing import Any, Callable, Dict, Mapping, Optional

__all__ = ["condition_fingerprint", "fingerprint_mismatch", "note_fingerprint"]

log = logging.getLogger("sync_worker.workflow")

_PREFIX = b"durable-workflow-python.wait-condition.v1\0"


def _stable(value: Any) -> str:
    """``repr(value)``, except for code objects and frozensets (see the module docstring)."""
    if isinstance(value, CodeType):
        return "code(" + _stable((value.co_name, value.co_argcount, value.co_posonlyargcount,
                                  value.co_kwonlyargcount, value.co_code, value.co_consts, value.co_names,
                                  value.co_varnames, value.co_freevars)) + ")"
    if isinstance(value, frozenset):
        return "frozenset({" + ", ".join(sorted(_stable(item) for item in value)) + "})" if value else "frozenset()"
    if isinstance(value, tuple):
        inner = ", ".join(_stable(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def condition_fingerprint(predicate: Callable[[], Any]) -> str:
    """``"sha256:<hex>"`` of a predicate's identity and code (the published SDK's, made stable)."""
    digest = hashlib.sha256()
    digest.update(_PREFIX)
    digest.update(f"{getattr(predicate, '__module__', '')}\0".encode())
    digest.update(f"{getattr(predicate, '__qualname__', '')}\0".encode())
    code = getattr(predicate, "__code__", None)
    if code is None:
        digest.update(repr(predicate).encode())
    else:
        identity = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_code,
                    code.co_consts, code.co_names, code.co_varnames, code.co_freevars)
        digest.update(_stable(identity).encode())
    return f"sha256:{digest.hexdigest()}"


def fingerprint_mismatch(recorded: Any, command: Any) -> Optional[str]:
    """A log message when ``recorded`` differs from the yielded wait's fingerprint, else None."""
    current = getattr(command, "condition_definition_fingerprint", None)
    if not isinstance(recorded, str) or not recorded or recorded == current:
        return None
    return (f"the predicate fingerprint differs from the recorded one (history {recorded!r}, now {current!r}): "
            "fingerprints hash CPython bytecode, so a run recorded under another Python version (or before the "
            "predicate changed) reads this way; the wait is matched by its recorded position and decided by the "
            "predicate, as on every replay")


_WARNED: Dict[str, bool] = {}
_WARNED_MAX = 1024


def note_fingerprint(warned: Dict[str, bool], opened: Mapping[str, Any], sequence: int, command: Any) -> None:
    """Log a recorded fingerprint that differs, once per value in this process (``warned``: per replay)."""
    recorded = opened.get("condition_definition_fingerprint")
    message = fingerprint_mismatch(recorded, command)
    key = f"{recorded}\0{getattr(command, 'condition_definition_fingerprint', None)}"
    if message is not None and not warned.get(key) and not _WARNED.get(key):
        warned[key] = True
        if len(_WARNED) < _WARNED_MAX:
            _WARNED[key] = True
        log.warning("condition wait %r at workflow sequence %d: %s", opened.get("condition_wait_id"), sequence,
                    message)

"""``upsert_memo``: merge Avro memo entries into the run's memo and record ``MemoUpserted``."""

from __future__ import annotations

import json
import re
from typing import Any, Dict

from ..errors import PayloadError
from ..payloads import decode_envelope, envelope
from .engine import Engine
from .store import Row
from .util import ApiError

_KEY = re.compile(r"^(?!-?[0-9]+$)[A-Za-z0-9_.:-]{1,64}$")
MAX_ENTRIES = 100


def _refuse(where: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"{where}: {message}", errors={where: [message]},
                    validation_errors={where: [message]})


def validate(cmd: Dict[str, Any], where: str) -> None:
    entries = cmd.get("entries")
    if not isinstance(entries, dict) or set(entries) != {"codec", "blob"}:
        raise _refuse(where, "entries must be exactly an Avro {codec, blob} envelope")
    try:
        decoded = decode_envelope(entries)
    except PayloadError as exc:
        raise ApiError(422, exc.reason, f"{where}.entries: {exc}") from None
    if not isinstance(decoded, dict) or not decoded:
        raise _refuse(where, "entries must decode to a non-empty string-keyed map")
    if len(decoded) > MAX_ENTRIES:
        raise _refuse(where, f"at most {MAX_ENTRIES} memo entries per upsert")
    bad = [key for key in decoded if not _KEY.match(key)]
    if bad:
        raise _refuse(where, f"invalid memo keys: {bad[:5]}")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def upsert(engine: Engine, run: Row, cmd: Dict[str, Any], sequence: int) -> None:
    current = run.get("memo_envelope")
    merged: Dict[str, Any] = dict(decode_envelope(current)) if current else dict(run.get("memo") or {})
    for key, value in decode_envelope(cmd["entries"]).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    merged_envelope = envelope(merged)
    run["memo_envelope"] = merged_envelope
    if _jsonable(merged):  # describe shows the plain memo when it is JSON (bytes stay in the envelope)
        run["memo"] = merged
    engine.append(run, "MemoUpserted", {"sequence": sequence, "entries": cmd["entries"], "merged": merged_envelope})

"""Results the codec cannot carry: find where, say it in the user's terms, fail at once.

An activity returning a ``Decimal``, a ``datetime`` or a model object cannot complete: the
Avro Value schema has no such type. Retrying returns the same value, so the attempt is
reported at once as a **non-retryable** failure whose message names the path written from the
result's root (``result["total"]``, ``result["lines"][2]["price"]``) and the Python type, with
a hint. :class:`~sync_worker.errors.ResultNotEncodable` is public so integrations (Django,
Celery) can raise or recognise the same error.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import PayloadEncodeError, ResultNotEncodable

__all__ = ["not_encodable", "not_encodable_failure", "python_path"]

_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")

_HINTS = {
    "Decimal": "convert it with str() or float()",
    "datetime": "convert it with .isoformat()",
    "date": "convert it with .isoformat()",
    "time": "convert it with .isoformat()",
    "UUID": "convert it with str()",
    "set": "convert it with list()",
    "frozenset": "convert it with list()",
    "generator": "did the code forget a 'yield' or a list()?",
}


def _steps(json_path: str) -> Optional[List[Any]]:
    if not json_path.startswith("$"):
        return None
    steps: List[Any] = []
    rest = json_path[1:]
    while rest:
        match = _PART.match(rest)
        if match is None:
            return None
        name, index, quoted = match.groups()
        if name is not None:
            steps.append(name)
        elif index is not None:
            steps.append(int(index))
        else:
            steps.append(quoted[1:-1])
        rest = rest[match.end():]
    return steps


def python_path(json_path: Optional[str], root: str = "result") -> Tuple[str, Optional[List[Any]]]:
    """``$.total[2]`` → ``result["total"][2]`` (and the steps to walk it)."""
    steps = _steps(json_path or "$")
    if steps is None:
        return f"{root} at {json_path}", None
    text = root + "".join(f"[{step}]" if isinstance(step, int) else f"[{step!r}]".replace("'", '"')
                          for step in steps)
    return text, steps


def _walk(value: Any, steps: Optional[List[Any]]) -> Any:
    for step in steps or []:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def not_encodable(error: PayloadEncodeError, value: Any, *, root: str = "result") -> ResultNotEncodable:
    """The public error for ``value`` (a task result) that failed to encode with ``error``."""
    path, steps = python_path(error.path, root)
    found = _walk(value, steps)
    type_name = type(found).__name__ if steps is not None else "value"
    detail = str(error).split(": ", 1)[-1]
    hint = _HINTS.get(type_name)
    message = f"{path} cannot be sent as a payload: {detail}" + (f" ({hint})" if hint else "")
    return ResultNotEncodable(message, path=path, value_type=type_name, reason=error.reason)


def not_encodable_failure(error: ResultNotEncodable) -> Dict[str, Any]:
    """The non-retryable failure body reported for an unencodable result."""
    return {"message": str(error), "type": "ResultNotEncodable",
            "class": f"{type(error).__module__}.{type(error).__qualname__}", "non_retryable": True}

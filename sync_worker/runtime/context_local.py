"""``ContextLocal``: a task-local attribute namespace kept in a context variable.

The gevent backend's task-local namespace (the running activity's context). Each greenlet runs
in its own ``contextvars`` context (greenlet 1.0 and later: a new greenlet starts with an empty
one) and each OS thread in its own, so attributes set in one task are never seen by another, as
with ``gevent.local``. What it saves: the first attribute ``gevent.local`` stores in a new
greenlet builds that greenlet's dictionary with two weak references and their callbacks (about
6,000 instructions per task greenlet, each task being a new greenlet); here it is one
``ContextVar.set`` of a small dict.

Values are never mutated in place: a setter stores a new dict, so a context copied from another
(``contextvars.copy_context().run``) starts with the values the copy saw and changes only its own.
"""

from __future__ import annotations

import contextvars
import itertools
from typing import Any, Dict

__all__ = ["ContextLocal"]

_names = itertools.count()


class ContextLocal:
    """Attributes per ``contextvars`` context (per greenlet, per thread): ``threading.local``'s surface."""

    __slots__ = ("_var",)

    def __init__(self) -> None:
        object.__setattr__(self, "_var", contextvars.ContextVar(f"sync_worker_local_{next(_names)}"))

    def __getattr__(self, name: str) -> Any:
        values: Dict[str, Any] = self._var.get(_EMPTY)
        try:
            return values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        values: Dict[str, Any] = self._var.get(_EMPTY)
        self._var.set({name: value} if not values else {**values, name: value})

    def __delattr__(self, name: str) -> None:
        values: Dict[str, Any] = self._var.get(_EMPTY)
        if name not in values:
            raise AttributeError(name)
        self._var.set({key: value for key, value in values.items() if key != name})


_EMPTY: Dict[str, Any] = {}

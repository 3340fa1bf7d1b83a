"""``self.request``: the running call's context, one stack per thread (or greenlet)."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

__all__ = ["Context", "RequestStack", "current_requests"]


class Context:
    """What Celery offers as ``task.request`` (the fields that apply here).

    ``id``, ``task``, ``args``, ``kwargs``, ``retries``, ``is_eager``, ``called_directly``,
    ``delivery_info`` (``{"exchange": "", "routing_key": queue, "priority": None,
    "redelivered": bool}``), ``hostname`` (the worker id), ``root_id``, ``parent_id``,
    ``group``, ``eta``, ``expires``, ``timelimit`` (``(hard, soft)``), ``headers`` (custom
    headers set at publish time; each is also an attribute, as in Celery), ``origin``,
    ``properties`` (message properties: ``correlation_id``, ``reply_to``, ``delivery_info`` and
    publish options the facade does not know, e.g. ``app_id=``), ``argsrepr``/``kwargsrepr``,
    ``replaced_task_nesting``, ``stamped_headers``/``stamps`` (a stamped call's stamps),
    ``callbacks``/``errbacks`` (a stamped call's linked signatures).
    """

    id: Optional[str] = None
    task: Optional[str] = None
    args: Any = None
    kwargs: Any = None
    retries: int = 0
    is_eager: bool = False
    called_directly: bool = True
    delivery_info: Optional[Dict[str, Any]] = None
    hostname: Optional[str] = None
    root_id: Optional[str] = None
    parent_id: Optional[str] = None
    group: Optional[str] = None
    group_index: Optional[int] = None
    chord: Any = None
    callbacks: Any = None
    errbacks: Any = None
    chain: Any = None
    eta: Optional[str] = None
    expires: Optional[str] = None
    timelimit: Any = (None, None)
    headers: Optional[Dict[str, Any]] = None
    origin: Optional[str] = None
    reply_to: Optional[str] = None
    correlation_id: Optional[str] = None
    ignore_result: bool = False
    properties: Optional[Dict[str, Any]] = None
    argsrepr: Optional[str] = None
    kwargsrepr: Optional[str] = None
    #: how many ``Task.replace`` calls deep this call runs (0 unless it replaced a task)
    replaced_task_nesting: int = 0
    #: canvas stamping (:mod:`.stamping`): the stamps' names and ``{name: value}`` (message headers)
    stamped_headers: Optional[List[str]] = None
    stamps: Optional[Dict[str, Any]] = None

    def __init__(self, **fields: Any) -> None:
        headers = fields.pop("headers", None) or {}
        for name, value in headers.items():
            if isinstance(name, str) and not name.startswith("_"):
                setattr(self, name, value)
        self.headers = dict(headers)
        for name, value in fields.items():
            setattr(self, name, value)
        if self.correlation_id is None:
            self.correlation_id = self.id

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def copy(self) -> Context:
        """The same fields, its own ``headers`` dict: what ``Context(**fields, headers=headers)`` of
        this context's fields makes (each header is already an attribute, the fields applied after it)."""
        clone = Context.__new__(Context)
        clone.__dict__.update(self.__dict__)
        clone.headers = dict(self.headers or {})
        return clone

    def as_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        return f"<Context: {self.as_dict()!r}>"


class RequestStack:
    """Per-thread (per-greenlet under gevent: ``threading.local`` is patched) request stack."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _stack(self) -> List[Context]:
        try:
            stack: List[Context] = self._local.stack
        except AttributeError:  # this thread's (greenlet's) first call
            stack = self._local.stack = []
        return stack

    def push(self, context: Context) -> None:
        self._stack().append(context)

    def pop(self) -> None:
        stack = self._stack()
        if stack:
            stack.pop()

    @property
    def top(self) -> Optional[Context]:
        stack = self._stack()
        return stack[-1] if stack else None


#: The calls running in this thread (greenlet), innermost last, whatever their task: a task called
#: or published from inside another gets ``parent_id`` = that call's id and its ``root_id``, as in Celery.
current_requests = RequestStack()

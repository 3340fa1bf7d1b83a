"""Applying worker interceptors: checking them at construction, nesting them per task.

The public types live in :mod:`sync_worker.interceptors`; this module is the runtime side.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence, Tuple, TypeVar

from ..interceptors import WorkerInterceptor

__all__ = ["HOOKS", "chain", "checked_interceptors"]

C = TypeVar("C")
R = TypeVar("R")

HOOKS = ("execute_workflow_task", "execute_activity", "execute_query_task")


def _is_async(hook: Any) -> bool:
    if inspect.iscoroutinefunction(hook) or inspect.isasyncgenfunction(hook):
        return True
    # an instance whose class defines ``async def __call__``
    return not inspect.isroutine(hook) and inspect.iscoroutinefunction(type(hook).__call__)


def checked_interceptors(interceptors: Sequence[Any]) -> Tuple[WorkerInterceptor, ...]:
    """The interceptors as a tuple, or ``TypeError`` for one that cannot run synchronously."""
    try:
        if isinstance(interceptors, (str, bytes)):
            raise TypeError
        checked = tuple(interceptors)
    except TypeError:
        raise TypeError(
            f"interceptors must be a sequence of interceptor instances, got {type(interceptors).__name__}"
        ) from None
    for position, interceptor in enumerate(checked):
        label = f"interceptor #{position} ({type(interceptor).__name__})"
        if isinstance(interceptor, type):
            raise TypeError(f"interceptor #{position} is the class {interceptor.__name__}; pass an instance")
        for name in HOOKS:
            hook = getattr(interceptor, name, None)
            if hook is None or not callable(hook):
                raise TypeError(
                    f"{label} has no callable {name}(context, next); subclass "
                    "sync_worker.interceptors.PassthroughWorkerInterceptor and override the hooks you need"
                )
            if _is_async(hook):
                raise TypeError(
                    f"{label}.{name} is an 'async def'; sync_worker runs synchronous interceptor hooks only "
                    "(define it with a plain 'def' and return next(context))"
                )
    return checked


def chain(
    interceptors: Sequence[WorkerInterceptor],
    hook: str,
    core: Callable[[C], R],
    *,
    none_allowed: bool,
) -> Callable[[C], R]:
    """``core`` wrapped by each interceptor's ``hook``; the first interceptor is the outermost.

    With no interceptors this is ``core`` itself. ``none_allowed=False`` makes a hook that
    returns ``None`` (usually a forgotten ``return next(context)``) an error of the task.
    """
    handler = core
    for interceptor in reversed(tuple(interceptors)):
        handler = _wrap(interceptor, hook, handler, none_allowed)
    return handler


def _wrap(interceptor: WorkerInterceptor, hook: str, inner: Callable[[C], R], none_allowed: bool) -> Callable[[C], R]:
    method: Callable[[C, Callable[[C], R]], R] = getattr(interceptor, hook)

    def call(context: C) -> R:
        result = method(context, inner)
        if inspect.iscoroutine(result):
            result.close()  # never awaited: close it so no "never awaited" warning follows
            raise TypeError(f"{type(interceptor).__name__}.{hook} returned a coroutine; hooks must be synchronous")
        if result is None and not none_allowed:
            raise TypeError(
                f"{type(interceptor).__name__}.{hook} returned None; it must return the result of next(context)"
            )
        return result

    return call

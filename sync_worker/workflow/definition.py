"""The authoring decorators: ``@workflow.defn``, ``@workflow.signal/query/update``.

``defn(name=...)`` stamps the class with its language-neutral type name and builds the
receiver registries once (``__workflow_signals__``, ``__workflow_queries__``,
``__workflow_updates__``, ``__workflow_update_validators__``: wire name -> method name).
The attribute names are the published SDK's, so tooling that reads them keeps working.

Rules enforced at decoration time (``InvalidWorkflowDefinition``): ``run`` must be a plain
function or a generator, never ``async def``; signal and update handlers must be plain
functions (queries and validators may be ``async def`` whose body never really awaits).
Two handlers of one kind with the same wire name raise ``DuplicateRegistrationError``.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Dict, Tuple, TypeVar

from ..errors import DuplicateRegistrationError, InvalidWorkflowDefinition

__all__ = ["MESSAGE_STREAM_SIGNAL", "defn", "handler_registries", "query", "signal", "update",
           "update_validator", "workflow_name"]

#: Reserved by the runtime for message streams; user signals may not use it.
MESSAGE_STREAM_SIGNAL = "__durable_workflow_message_stream"

_T = TypeVar("_T", bound=type)
_F = TypeVar("_F", bound=Callable[..., Any])
_KINDS = ("signal", "query", "update", "update_validator")


def workflow_name(cls: type) -> str:
    """The wire name of a workflow class (its class name if it was never decorated)."""
    return str(getattr(cls, "__workflow_name__", cls.__name__))


def _is_async(target: Any) -> bool:
    target = inspect.unwrap(target)
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


#: the ``run`` each class was last found valid with (a replay checks its class per task)
_VALID_RUN: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()


def validate_entrypoint(cls: type) -> None:
    """Refuse an ``async def run`` (or async generator) with a clear message.

    A class found valid is not checked again while its ``run`` is the same object."""
    run = getattr(cls, "run", None)
    try:
        if run is not None and _VALID_RUN.get(cls) is run:
            return
    except TypeError:  # a class that cannot be weakly referenced: checked each time
        pass
    if run is None or not callable(run):
        raise InvalidWorkflowDefinition(f"workflow {cls.__qualname__} has no run(self, ctx, ...) method")
    if _is_async(run):
        raise InvalidWorkflowDefinition(
            f"unsupported_workflow_entrypoint: workflow {workflow_name(cls)!r} ({cls.__qualname__}.run) "
            "must be a plain function or a generator; yield durable commands instead of using async def."
        )
    try:
        _VALID_RUN[cls] = run
    except TypeError:
        pass


def handler_registries(cls: type) -> Tuple[Dict[str, str], Dict[str, str], Dict[str, str], Dict[str, str]]:
    """Scan ``cls`` for decorated handlers: (signals, queries, updates, validators)."""
    registries: Dict[str, Dict[str, str]] = {kind: {} for kind in _KINDS}
    for attr in dir(cls):
        if attr.startswith("_"):
            continue
        member = getattr(cls, attr, None)
        for kind, registry in registries.items():
            wire = getattr(member, f"__{kind}_name__", None)
            if not isinstance(wire, str) or not wire:
                continue
            target = inspect.unwrap(member)  # type: ignore[arg-type]
            if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target) or (
                inspect.iscoroutinefunction(target) and kind not in ("query", "update_validator")
            ):
                raise InvalidWorkflowDefinition(
                    f"unsupported_workflow_handler: workflow {workflow_name(cls)!r} ({cls.__qualname__}.{attr}) "
                    f"{kind} handler {wire!r} must be a plain function; yield durable commands from run()."
                )
            if wire in registry:
                raise DuplicateRegistrationError(kind, wire)
            registry[wire] = attr
    return registries["signal"], registries["query"], registries["update"], registries["update_validator"]


def defn(*, name: str) -> Callable[[_T], _T]:
    """Register a class as a workflow type under the language-neutral ``name``."""
    if not isinstance(name, str) or not name:
        raise InvalidWorkflowDefinition("workflow.defn(name=...) requires a non-empty name")

    def wrap(cls: _T) -> _T:
        cls.__workflow_name__ = name  # type: ignore[attr-defined]
        validate_entrypoint(cls)
        signals, queries, updates, validators = handler_registries(cls)
        cls.__workflow_signals__ = signals  # type: ignore[attr-defined]
        cls.__workflow_queries__ = queries  # type: ignore[attr-defined]
        cls.__workflow_updates__ = updates  # type: ignore[attr-defined]
        cls.__workflow_update_validators__ = validators  # type: ignore[attr-defined]
        return cls

    return wrap


def signal(name: str) -> Callable[[_F], _F]:
    """Mark a method as the handler of signal ``name`` (sync; its return value is ignored)."""
    if name == MESSAGE_STREAM_SIGNAL:
        raise ValueError(f"signal name {name!r} is reserved by the workflow runtime")

    def wrap(method: _F) -> _F:
        method.__signal_name__ = name  # type: ignore[attr-defined]
        return method

    return wrap


def query(name: str) -> Callable[[_F], _F]:
    """Mark a read-only method as the handler of query ``name``."""

    def wrap(method: _F) -> _F:
        method.__query_name__ = name  # type: ignore[attr-defined]
        return method

    return wrap


def update(name: str) -> Callable[[_F], _F]:
    """Mark a method as the handler of update ``name``; ``@<handler>.validator`` adds a validator."""

    def wrap(method: _F) -> _F:
        method.__update_name__ = name  # type: ignore[attr-defined]

        def validator(validator_method: _F) -> _F:
            validator_method.__update_validator_name__ = name  # type: ignore[attr-defined]
            return validator_method

        method.validator = validator  # type: ignore[attr-defined]
        return method

    return wrap


def update_validator(name: str) -> Callable[[_F], _F]:
    """Mark a method as the validator of update ``name``."""

    def wrap(method: _F) -> _F:
        method.__update_validator_name__ = name  # type: ignore[attr-defined]
        return method

    return wrap

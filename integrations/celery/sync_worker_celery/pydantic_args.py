"""``@app.task(pydantic=True)``: arguments annotated with a pydantic model are validated into it,
and a returned model is dumped to a dict (Celery 5.5's option, same rules).

The wrapper reads the function's type hints when first called (string annotations included), so
pydantic is needed only by projects that use the option (``pip install pydantic``, as for Celery).
Options: ``pydantic_strict`` (default False), ``pydantic_context``, ``pydantic_dump_kwargs``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import typing
from typing import Any, Callable, Dict, List, Optional

__all__ = ["PYDANTIC_OPTIONS", "wrap"]

PYDANTIC_OPTIONS = ("pydantic_strict", "pydantic_context", "pydantic_dump_kwargs")


def wrap(fun: Callable[..., Any], strict: bool = False, context: Optional[Dict[str, Any]] = None,
         dump_kwargs: Optional[Dict[str, Any]] = None) -> Callable[..., Any]:
    try:  # imported by name: pydantic is the project's own dependency, not the facade's
        BaseModel: Any = importlib.import_module("pydantic").BaseModel
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(f"task {fun.__qualname__} uses pydantic=True but pydantic is not installed "
                          "(pip install pydantic)") from None
    signature = inspect.signature(fun)
    hints: Dict[str, Any] = {}
    resolved: List[bool] = []

    def model(hint: Any) -> Any:
        return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None

    @functools.wraps(fun)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not resolved:
            hints.update(typing.get_type_hints(fun))
            resolved.append(True)
        bound = signature.bind(*args, **kwargs)
        for name, value in list(bound.arguments.items()):
            target = model(hints.get(name))
            if target is not None and not isinstance(value, target):
                bound.arguments[name] = target.model_validate(value, strict=strict, context=context)
        value = fun(*bound.args, **bound.kwargs)
        if isinstance(value, BaseModel):
            return value.model_dump(**(dump_kwargs or {}))
        return value

    return run

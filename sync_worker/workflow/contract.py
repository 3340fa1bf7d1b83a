"""Registration metadata of a workflow class (protocol §3.1).

``workflow_definition_fingerprint(cls)`` is ``"sha256:<hex>"`` over the tag
``durable-workflow-python.workflow-definition.v1\\0``, the class's module and qualname,
its type name, its handler registries and its source (the published SDK's inputs).
``workflow_command_contract(cls)`` describes the signal / query / update handlers and
their positional parameters so the server can validate commands before delivery.
"""

from __future__ import annotations

import collections.abc
import hashlib
import inspect
import json
import typing
from typing import Any, Dict, List, Optional, Tuple

from .definition import workflow_name

__all__ = ["workflow_command_contract", "workflow_definition_fingerprint"]

_REGISTRIES = ("__workflow_signals__", "__workflow_queries__", "__workflow_updates__",
               "__workflow_update_validators__")


def workflow_definition_fingerprint(cls: type) -> str:
    digest = hashlib.sha256()
    digest.update(b"durable-workflow-python.workflow-definition.v1\0")
    digest.update(f"{cls.__module__}.{cls.__qualname__}\0".encode())
    digest.update(f"{workflow_name(cls)}\0".encode())
    for registry in _REGISTRIES:
        digest.update(registry.encode())
        digest.update(repr(sorted((getattr(cls, registry, {}) or {}).items())).encode())
    try:
        digest.update(inspect.getsource(cls).encode())
    except (OSError, TypeError):
        # No source (REPL, frozen app): fall back to the members' code objects.
        for attr, value in sorted(cls.__dict__.items()):
            if attr.startswith("__") and attr.endswith("__"):
                continue
            digest.update(attr.encode())
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            digest.update(repr((code.co_code, code.co_consts, code.co_names) if code else repr(value)).encode())
    return f"sha256:{digest.hexdigest()}"


_SCALARS = {bool: "bool", int: "int", float: "float", str: "string"}
_NAMED = {"any": "mixed", "object": "mixed", "bool": "bool", "int": "int", "float": "float", "str": "string",
          "callable": "callable", "none": "null", "nonetype": "null", "dict": "array", "list": "array",
          "tuple": "array", "set": "array", "frozenset": "array", "mapping": "array", "sequence": "array",
          "iterable": "array"}


def _union(members: List[Any]) -> Tuple[str, bool]:
    seen: List[str] = []
    nullable = False
    for member in members:
        kind, member_nullable = _param_type(member)
        if kind is None or kind == "mixed":
            return "mixed", True
        nullable = nullable or member_nullable or kind == "null"
        if kind not in seen:
            seen.append(kind)
    return ("|".join(seen), nullable) if seen else ("mixed", True)


def _param_type(annotation: Any) -> Tuple[Optional[str], bool]:
    """(protocol type, allows_null) of an annotation; ``(None, True)`` when unknown."""
    if annotation is inspect.Parameter.empty:
        return None, True
    if isinstance(annotation, str):
        text = annotation.strip().replace("typing.", "")
        if text.startswith("Optional[") and text.endswith("]"):
            return _union([text[9:-1], "None"])
        if text.startswith("Union[") and text.endswith("]"):
            return _union([part.strip() for part in text[6:-1].split(",")])
        if "|" in text:
            return _union([part.strip() for part in text.split("|")])
        kind = _NAMED.get(text.split("[", 1)[0].strip().lower())
        return (kind, kind in ("mixed", "null")) if kind else (None, True)
    if annotation is Any or annotation is object:
        return "mixed", True
    if annotation is None or annotation is type(None):
        return "null", True
    origin = typing.get_origin(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        return _union(list(typing.get_args(annotation)))
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    candidate = origin or annotation
    if isinstance(candidate, type) and not issubclass(candidate, (str, bytes)) and issubclass(
            candidate, (collections.abc.Mapping, collections.abc.Iterable)):
        return "array", False
    if getattr(candidate, "__name__", "") == "Callable":
        return "callable", False
    return None, True


def _handler_contract(cls: type, name: str, attr: str) -> Dict[str, Any]:
    descriptor = inspect.getattr_static(cls, attr)
    is_static = isinstance(descriptor, staticmethod)
    function = descriptor.__func__ if isinstance(descriptor, (staticmethod, classmethod)) else getattr(cls, attr)
    try:
        hints = typing.get_type_hints(function)
    except Exception:
        hints = {}
    parameters = list(inspect.signature(function).parameters.values())
    if not is_static and parameters:
        parameters = parameters[1:]
    out: List[Dict[str, Any]] = []
    for position, parameter in enumerate(parameters):
        if parameter.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"workflow handler {cls.__name__}.{attr} parameter {parameter.name!r} must be positional")
        has_default = parameter.default is not inspect.Parameter.empty
        if has_default:
            try:
                json.dumps(parameter.default, allow_nan=False)
            except (TypeError, ValueError):
                raise TypeError(f"workflow handler {cls.__name__}.{attr} has a non-serializable default for "
                                f"{parameter.name!r}") from None
        kind, nullable = _param_type(hints.get(parameter.name, parameter.annotation))
        variadic = parameter.kind is inspect.Parameter.VAR_POSITIONAL
        out.append({"name": parameter.name, "position": position, "required": not has_default and not variadic,
                    "variadic": variadic, "default_available": has_default,
                    "default": parameter.default if has_default else None, "type": kind, "allows_null": nullable})
    return {"name": name, "parameters": out}


def workflow_command_contract(cls: type) -> Dict[str, Any]:
    contract: Dict[str, Any] = {}
    for plural, singular, registry_name in (("queries", "query", "__workflow_queries__"),
                                            ("signals", "signal", "__workflow_signals__"),
                                            ("updates", "update", "__workflow_updates__")):
        registry = getattr(cls, registry_name, {}) or {}
        contract[plural] = sorted(registry)
        contract[f"{singular}_contracts"] = [_handler_contract(cls, name, registry[name]) for name in sorted(registry)]
    contract["update_validators"] = sorted(getattr(cls, "__workflow_update_validators__", {}) or {})
    return contract

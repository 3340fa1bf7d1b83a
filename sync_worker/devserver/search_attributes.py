"""Search attribute definitions per namespace: the system set plus operator-defined custom ones.

Definitions are catalogue entries (list / create / delete), as the real server keeps them; the dev
server does not check ``upsert_search_attributes`` commands or start bodies against them.
"""

from __future__ import annotations

import re
from typing import Any, Dict

from .engine import Engine
from .util import ApiError

SYSTEM_ATTRIBUTES = {
    "WorkflowType": "keyword", "WorkflowId": "keyword", "RunId": "keyword", "TaskQueue": "keyword",
    "ExecutionStatus": "keyword", "StartTime": "datetime", "CloseTime": "datetime", "BusinessKey": "keyword",
}
TYPES = ("keyword", "text", "int", "double", "bool", "datetime", "keyword_list")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def _key(namespace: str, name: str) -> str:
    return f"{namespace}\0search_attribute\0{name}"


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"{field} {message}", errors={field: [message]},
                    validation_errors={field: [message]})


def list_attributes(engine: Engine, namespace: str) -> Dict[str, Any]:
    rows = engine.store.select("kv", "namespace = ? AND kind = 'search_attribute'", (namespace,), order="key")
    return {"namespace": namespace, "system_attributes": dict(SYSTEM_ATTRIBUTES),
            "custom_attributes": {row["name"]: row["type"] for row in rows}}


def create(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    name = body.get("name")
    kind = body.get("type", body.get("attribute_type"))
    if not isinstance(name, str) or not _NAME.match(name):
        raise _invalid("name", "must start with a letter and use [A-Za-z0-9_], at most 64 characters")
    if kind not in TYPES:
        raise _invalid("type", f"must be one of {', '.join(TYPES)}")
    if name in SYSTEM_ATTRIBUTES:
        raise ApiError(409, "search_attribute_reserved", f"{name} is a system search attribute", name=name)
    if engine.store.get("kv", _key(namespace, name)) is not None:
        raise ApiError(409, "search_attribute_already_exists", f"search attribute {name} already exists", name=name)
    engine.store.put("kv", {"key": _key(namespace, name), "namespace": namespace, "kind": "search_attribute",
                            "name": name, "type": kind})
    return {"name": name, "type": kind, "outcome": "created"}


def delete(engine: Engine, namespace: str, name: str) -> Dict[str, Any]:
    if name in SYSTEM_ATTRIBUTES:
        raise ApiError(409, "search_attribute_reserved", f"{name} is a system search attribute", name=name)
    if engine.store.get("kv", _key(namespace, name)) is None:
        raise ApiError(404, "search_attribute_not_found", f"search attribute {name} was not found", name=name)
    engine.store.delete("kv", _key(namespace, name))
    return {"name": name, "outcome": "deleted"}

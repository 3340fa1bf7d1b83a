"""Route-table rows for the operator surface: namespaces, schedules, task queues, search
attributes, history export and the workflow maintenance commands.

Kept apart from :mod:`.routes` so each family stays a small module; ``routes`` appends
:data:`ROUTES` to its table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Tuple

from . import namespaces, schedules

if TYPE_CHECKING:
    from .routes import Request, Routes

Handler = Callable[["Routes", "Request"], Tuple[int, Any]]


def _tx(r: Routes, fn: Callable[[], Dict[str, Any]], status: int = 200) -> Tuple[int, Any]:
    with r.engine.tx():
        return status, fn()


# -- namespaces --------------------------------------------------------------------------------
def _ns_list(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: namespaces.list_namespaces(r.engine))


def _ns_create(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: namespaces.create(r.engine, req.body), 201)


def _ns_describe(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: namespaces.describe(r.engine, req.params["name"]))


def _ns_update(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: namespaces.update(r.engine, req.params["name"], req.body))


def _ns_delete(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: namespaces.delete(r.engine, req.params["name"]))


def _ns_storage(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: namespaces.set_external_storage(r.engine, req.params["name"], req.body))


# -- schedules ---------------------------------------------------------------------------------
def _schedule(op: str) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        ns, sid, body = req.namespace, req.params.get("schedule_id", ""), req.body
        calls: Dict[str, Callable[[], Dict[str, Any]]] = {
            "list": lambda: schedules.list_schedules(r.engine, ns, req.query),
            "create": lambda: schedules.create(r.engine, ns, body),
            "describe": lambda: schedules.describe(r.engine, ns, sid),
            "update": lambda: schedules.update(r.engine, ns, sid, body),
            "delete": lambda: schedules.delete(r.engine, ns, sid),
            "pause": lambda: schedules.set_paused(r.engine, ns, sid, body, True),
            "resume": lambda: schedules.set_paused(r.engine, ns, sid, body, False),
            "trigger": lambda: schedules.trigger(r.engine, ns, sid, body),
            "backfill": lambda: schedules.backfill(r.engine, ns, sid, body),
            "history": lambda: schedules.history(r.engine, ns, sid, req.query),
        }
        status, payload = _tx(r, calls[op], 201 if op == "create" else 200)
        if op in ("trigger", "backfill"):
            r.engine.notify_everyone()  # started runs have workflow tasks waiting
        return status, payload
    return handler


_NAME = "(?P<name>[^/]+)"
_SCHEDULE = "/api/schedules/(?P<schedule_id>[^/]+)"

ROUTES: List[Tuple[str, str, Handler]] = [
    ("GET", "/api/namespaces", _ns_list),
    ("POST", "/api/namespaces", _ns_create),
    ("GET", "/api/namespaces/" + _NAME, _ns_describe),
    ("PUT", "/api/namespaces/" + _NAME, _ns_update),
    ("DELETE", "/api/namespaces/" + _NAME, _ns_delete),
    ("PUT", "/api/namespaces/" + _NAME + "/external-storage", _ns_storage),
    ("GET", "/api/schedules", _schedule("list")),
    ("POST", "/api/schedules", _schedule("create")),
    ("GET", _SCHEDULE, _schedule("describe")),
    ("PUT", _SCHEDULE, _schedule("update")),
    ("DELETE", _SCHEDULE, _schedule("delete")),
    ("POST", _SCHEDULE + "/pause", _schedule("pause")),
    ("POST", _SCHEDULE + "/resume", _schedule("resume")),
    ("POST", _SCHEDULE + "/trigger", _schedule("trigger")),
    ("POST", _SCHEDULE + "/backfill", _schedule("backfill")),
    ("GET", _SCHEDULE + "/history", _schedule("history")),
]

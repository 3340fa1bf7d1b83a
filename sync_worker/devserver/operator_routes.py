"""Route-table rows for the operator surface: namespaces, schedules, task queues, search
attributes, history export and the workflow maintenance commands.

Kept apart from :mod:`.routes` so each family stays a small module; ``routes`` appends
:data:`ROUTES` to its table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Tuple

from . import maintenance, namespaces, schedules, search_attributes, system, task_queues

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


# -- task queues, search attributes, export and maintenance ------------------------------------
def _tq_list(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: task_queues.list_queues(r.engine, req.namespace))


def _tq_describe(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: task_queues.describe(r.engine, req.namespace, req.params["queue"]))


def _tq_build_ids(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: task_queues.build_ids(r.engine, req.namespace, req.params["queue"]))


def _tq_rollout(action: str) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        return _tx(r, lambda: task_queues.set_rollout(r.engine, req.namespace, req.params["queue"], action,
                                                      req.body))
    return handler


def _sa_list(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: search_attributes.list_attributes(r.engine, req.namespace))


def _sa_create(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: search_attributes.create(r.engine, req.namespace, req.body), 201)


def _sa_delete(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: search_attributes.delete(r.engine, req.namespace, req.params["name"]))


def _export(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return _tx(r, lambda: maintenance.export(r.engine, req.namespace, p["workflow_id"], p["run_id"]))


def _repair(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: maintenance.repair(r.engine, req.namespace, req.params["workflow_id"]))


def _archive(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: maintenance.archive(r.engine, req.namespace, req.params["workflow_id"], req.body))


def _redrive(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return _tx(r, lambda: maintenance.redrive(r.engine, req.namespace, p["workflow_id"], p["run_id"]))


def _system(name: str) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        calls: Dict[str, Callable[[], Dict[str, Any]]] = {
            "repair": lambda: system.repair_status(r.engine, req.namespace),
            "repair_pass": lambda: system.repair_pass(r.engine, req.namespace, req.body),
            "retention": lambda: system.retention_status(r.engine, req.namespace),
            "retention_pass": lambda: system.retention_pass(r.engine, req.namespace, req.body),
            "activity_timeouts": lambda: system.activity_timeout_status(r.engine, req.namespace),
            "activity_timeouts_pass": lambda: system.activity_timeout_pass(r.engine, req.namespace, req.body),
        }
        status, payload = _tx(r, calls[name])
        if name.endswith("_pass"):
            r.engine.notify_everyone()  # re-dispatched work may be waiting for a poll
        return status, payload
    return handler


_TQ = "/api/task-queues/(?P<queue>[^/]+)"
_WF = "/api/workflows/(?P<workflow_id>[^/]+)"
_OPS: List[Tuple[str, str, Handler]] = [
    ("GET", "/api/task-queues", _tq_list),
    ("GET", _TQ, _tq_describe),
    ("GET", _TQ + "/build-ids", _tq_build_ids),
    ("POST", _TQ + "/build-ids/drain", _tq_rollout("drain")),
    ("POST", _TQ + "/build-ids/promote", _tq_rollout("promote")),
    ("POST", _TQ + "/build-ids/resume", _tq_rollout("resume")),
    ("GET", "/api/search-attributes", _sa_list),
    ("POST", "/api/search-attributes", _sa_create),
    ("DELETE", "/api/search-attributes/(?P<name>[^/]+)", _sa_delete),
    ("GET", _WF + "/runs/(?P<run_id>[^/]+)/history/export", _export),
    ("POST", _WF + "/repair", _repair),
    ("POST", _WF + "/archive", _archive),
    ("POST", _WF + "/runs/(?P<run_id>[^/]+)/redrive", _redrive),
    ("GET", "/api/system/repair", _system("repair")),
    ("POST", "/api/system/repair/pass", _system("repair_pass")),
    ("GET", "/api/system/retention", _system("retention")),
    ("POST", "/api/system/retention/pass", _system("retention_pass")),
    ("GET", "/api/system/activity-timeouts", _system("activity_timeouts")),
    ("POST", "/api/system/activity-timeouts/pass", _system("activity_timeouts_pass")),
]

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
    *_OPS,
]

"""Route-table rows for the operator surface: namespaces, schedules, task queues, search
attributes, history export and the workflow maintenance commands.

Kept apart from :mod:`.routes` so each family stays a small module; ``routes`` appends
:data:`ROUTES` to its table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Tuple

from . import namespaces

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


_NAME = "(?P<name>[^/]+)"

ROUTES: List[Tuple[str, str, Handler]] = [
    ("GET", "/api/namespaces", _ns_list),
    ("POST", "/api/namespaces", _ns_create),
    ("GET", "/api/namespaces/" + _NAME, _ns_describe),
    ("PUT", "/api/namespaces/" + _NAME, _ns_update),
    ("DELETE", "/api/namespaces/" + _NAME, _ns_delete),
    ("PUT", "/api/namespaces/" + _NAME + "/external-storage", _ns_storage),
]

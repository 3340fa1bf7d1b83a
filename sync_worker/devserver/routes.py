"""The route table: method + path pattern -> handler. Handlers return ``(status, body)``."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Pattern, Tuple

from ..protocol import routes as wire
from ..protocol.versions import WORKER_PROTOCOL_VERSION
from . import (
    activities,
    control,
    history_route,
    operator_routes,
    routing,
    sessions,
    streams,
    tasks,
    updates,
    workers,
    workflow_streams,
)
from .discovery import cluster_info, server_capabilities
from .engine import Engine
from .history_route import HISTORY_SETTLE_SECONDS as HISTORY_SETTLE_SECONDS
from .history_route import HISTORY_WAIT_SECONDS as HISTORY_WAIT_SECONDS
from .queries import QueryBroker
from .update_validation import ValidationBroker, multiplexed
from .util import ApiError, iso, require_str


@dataclass
class Request:
    method: str
    path: str
    query: Dict[str, str]
    headers: Any
    namespace: str = "default"
    plane: str = "control"
    body: Dict[str, Any] = field(default_factory=dict)
    params: Dict[str, str] = field(default_factory=dict)
    #: whether the client is still connected (a long poll must not lease work to a caller that left)
    client_connected: Callable[[], bool] = lambda: True


Handler = Callable[["Routes", Request], Tuple[int, Any]]


_REGEX_SPECIALS = frozenset("\\.^$*+?{}[]|()")


def _literal_prefix(pattern: str) -> str:
    """The leading characters of a route pattern that can only match themselves."""
    for index, char in enumerate(pattern):
        if char in _REGEX_SPECIALS:  # a quantifier may make the character before it optional
            return pattern[:index - 1] if char in "?*+{" and index else pattern[:index]
    return pattern


def first_match(rows: Iterable[Tuple[str, str, Pattern[str], Handler]], method: str,
                path: str) -> Tuple[Optional[Handler], Dict[str, str], bool]:
    """The first of ``rows`` (``(method, literal prefix, regex, handler)``, in table order) that
    matches ``path`` for ``method``, its params, and whether any row matched ``path`` at all."""
    path_known = False
    for route_method, prefix, regex, handler in rows:
        if not path.startswith(prefix):
            continue
        found = regex.match(path)
        if found:
            path_known = True
            if route_method == method:
                return handler, found.groupdict(), True
    return None, {}, path_known


class Routes:
    def __init__(self, engine: Engine, broker: QueryBroker) -> None:
        self.engine = engine
        self.broker = broker
        #: ``(method, literal prefix, regex, handler)``: a path that does not start with a route's
        #: literal prefix cannot match it, so most routes cost a ``startswith``, not a regex match.
        self.table: List[Tuple[str, str, Pattern[str], Handler]] = []
        for method, pattern, handler in _ROUTES:
            self.table.append((method, _literal_prefix(pattern), re.compile("^" + pattern + "$"), handler))
        #: Paths that are a route's whole pattern (no parameter: the hot worker-plane routes and the
        #: starts): their scan's answer per method is kept, so a poll or a start is one dict lookup.
        self._literal_paths = frozenset(pattern for _, pattern, _ in _ROUTES if _literal_prefix(pattern) == pattern)
        self._known: Dict[Tuple[str, str], Tuple[Optional[Handler], Dict[str, str], bool]] = {}
        #: Directory prefixes (ending in ``/``) of the routes' literal prefixes -> the routes, in table
        #: order, a path under that directory can match: those whose literal prefix is under it or
        #: holds it. A path with a parameter (a completion, a describe) scans its deepest directory's
        #: few routes, not the whole table; the first match is the same one (see :meth:`_candidates`).
        self._dirs: Dict[str, List[Tuple[str, str, Pattern[str], Handler]]] = {}
        for _, prefix, _, _ in self.table:
            end = prefix.find("/") + 1
            while end:
                self._dirs.setdefault(prefix[:end], [])
                end = prefix.find("/", end) + 1
        for directory, routes in self._dirs.items():
            routes.extend(route for route in self.table
                          if route[1].startswith(directory) or directory.startswith(route[1]))

    def match(self, method: str, path: str) -> Tuple[Optional[Handler], Dict[str, str], bool]:
        """The handler and path params; the flag says whether the path exists for another method."""
        known = self._known.get((method, path))
        if known is not None:
            return known[0], dict(known[1]), known[2]
        found = self._scan(method, path)
        if path in self._literal_paths:  # a finite set: the memo never grows past the route table
            self._known[(method, path)] = (found[0], dict(found[1]), found[2])
        return found

    def _candidates(self, path: str) -> List[Tuple[str, str, Pattern[str], Handler]]:
        """The routes ``path`` can match, in table order: its deepest directory's (the whole table when
        it is under none). A route whose literal prefix is neither under the directory nor holds it
        does not start the path, so it cannot match; the directories are prefix-closed (every
        shallower directory of one is one too), so the walk stops at the first one that is not."""
        found = self.table
        end = path.find("/") + 1
        while end:
            routes = self._dirs.get(path[:end])
            if routes is None:
                break
            found = routes
            end = path.find("/", end) + 1
        return found

    def _scan(self, method: str, path: str) -> Tuple[Optional[Handler], Dict[str, str], bool]:
        return first_match(self._candidates(path), method, path)

    # -- long polls --------------------------------------------------------------------------
    def long_poll(self, req: Request, kind: str,
                  claim: Callable[[str, str, int, Optional[List[str]]], Optional[Dict[str, Any]]],
                  replay: Optional[Callable[[str, Any, str], Optional[Dict[str, Any]]]] = None
                  ) -> Dict[str, Any]:
        engine = self.engine
        worker_id = require_str(req.body, "worker_id")
        queue = require_str(req.body, "task_queue")
        assert worker_id is not None and queue is not None
        raw_timeout = req.body.get("timeout_seconds", 30)
        if isinstance(raw_timeout, bool) or not isinstance(raw_timeout, (int, float)):
            raise ApiError(422, "validation_failed", "timeout_seconds must be a number",
                           errors={"timeout_seconds": ["must be a number"]},
                           validation_errors={"timeout_seconds": ["must be a number"]})
        timeout = max(0.0, min(float(raw_timeout), engine.config.long_poll_max_seconds, 60.0))
        page_size = req.body.get("history_page_size", 500)
        page_size = max(1, min(int(page_size), 1000)) if isinstance(page_size, int) else 500
        poll_id = req.body.get("poll_request_id")
        deadline = time.monotonic() + timeout
        envelope = {"protocol_version": WORKER_PROTOCOL_VERSION, "server_capabilities": server_capabilities(engine)}
        with engine.lock:  # one acquisition per poll (contended locks cost a context switch each)
            waiting = engine.waiters(req.namespace, kind, queue)
            first = True
            seen = waiting.generation  # wake-ups produced before this poll waits are not its to pass on
            while True:
                if engine.stopping:
                    return {"task": None, "poll_status": "draining", **envelope}
                # One transaction per round: the worker's liveness, a replayed poll, the claim.
                with engine.round_tx():
                    if first:
                        worker = workers.touch(engine, req.namespace, worker_id)
                        if worker is None or worker["status"] != "active":
                            # As the real server: polling needs a registration (412), so a worker
                            # whose registration was removed learns it and registers again, instead
                            # of long-polling for nothing (server ActivityTaskController /
                            # WorkerController::resolveRegisteredWorker).
                            raise ApiError(412, "worker_not_registered", "Worker must be registered before "
                                           "polling. Call POST /worker/register first.", worker_id=worker_id)
                        leasable = True
                        if isinstance(poll_id, str) and replay is not None:
                            stored = engine.polled(req.namespace, kind, poll_id)
                            again = replay(stored[0], stored[1], worker_id) if stored is not None else None
                            if again is not None:
                                return {"task": again, **envelope, "server_time": iso(engine.now())}
                    else:  # after a wait the worker may have deregistered (or registered again)
                        worker = workers.peek(engine, req.namespace, worker_id)
                        leasable = worker is None or worker["status"] == "active"
                    first = False
                    if not req.client_connected() or not leasable:
                        waiting.pass_on(seen)
                        return {"task": None, "poll_status": "abandoned", **envelope}
                    types = routing.types_for(worker, kind)
                    refusal = routing.poll_refusal(kind, types)
                    if refusal is not None:
                        waiting.pass_on(seen)
                        return {**refusal, **envelope, "server_time": iso(engine.now())}
                    task = claim(queue, worker_id, page_size, types)
                    if task is not None and isinstance(poll_id, str) and replay is not None and "task_id" in task:
                        engine.remember_poll(req.namespace, kind, poll_id, task["task_id"],
                                             task.get("workflow_task_attempt"))
                if task is not None:
                    return {"task": task, **envelope, "server_time": iso(engine.now())}
                waiting.pass_on(seen)
                seen = waiting.generation
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return {"task": None, "poll_status": "timeout", **envelope, "server_time": iso(engine.now())}
                waiting.wait(remaining)


def _json(status: int, body: Any) -> Tuple[int, Any]:
    return status, body


# -- discovery ---------------------------------------------------------------------------------
def _health(r: Routes, req: Request) -> Tuple[int, Any]:
    return 200, {"status": "serving", "timestamp": iso(r.engine.now())}


def _ready(r: Routes, req: Request) -> Tuple[int, Any]:
    with r.engine.lock:
        r.engine.store.count("runs")
    return 200, {"status": "ready", "timestamp": iso(r.engine.now()), "namespaces": list(r.engine.namespaces)}


def _cluster_info(r: Routes, req: Request) -> Tuple[int, Any]:
    return 200, cluster_info(r.engine, req.namespace)


# -- worker plane --------------------------------------------------------------------------------
def _tx(r: Routes, fn: Callable[[], Any], status: int = 200) -> Tuple[int, Any]:
    with r.engine.tx():
        return status, fn()


def _register(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: workers.register(r.engine, req.namespace, req.body), 201)


def _heartbeat(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: workers.heartbeat(r.engine, req.namespace, req.body))


def _deregister_fenced(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: workers.deregister_fenced(r.engine, req.namespace, req.params["worker_id"], req.body))


def _deregister_legacy(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: workers.deregister_legacy(r.engine, req.namespace, req.params["worker_id"]))


def _session_create(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: sessions.create(r.engine, req.namespace, req.body))


def _session_heartbeat(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: sessions.heartbeat(r.engine, req.namespace, req.params["session_id"], req.body))


def _session_close(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: sessions.close(r.engine, req.namespace, req.params["session_id"], req.body))


def _poll_workflow(r: Routes, req: Request) -> Tuple[int, Any]:
    def replay(task_id: str, attempt: Any, worker_id: str) -> Optional[Dict[str, Any]]:
        """Only the lease this very poll obtained (same attempt, same worker) is handed out again."""
        again = tasks.rendered_for_poll(r.engine, task_id, attempt or 0)
        return again if again is not None and again["lease_owner"] == worker_id else None

    validations = ValidationBroker.of(r.engine) if multiplexed(req.body.get("task_kinds")) else None

    def claim(q: str, w: str, p: int, types: Optional[List[str]]) -> Optional[Dict[str, Any]]:
        # ``task_kinds`` with ``update_validation``: one poll, one slot, either kind (§4.10); a waiting
        # caller's validation goes first
        if validations is not None:
            found = validations.claim(req.namespace, q, workers.peek(r.engine, req.namespace, w))
            if found is not None:
                return found
        return tasks.claim(r.engine, req.namespace, q, w, p, types)

    return 200, r.long_poll(req, "workflow", claim, replay)


def _poll_validation(r: Routes, req: Request) -> Tuple[int, Any]:
    validations = ValidationBroker.of(r.engine)
    return 200, r.long_poll(req, "update_validation", lambda q, w, p, types: validations.claim(
        req.namespace, q, workers.peek(r.engine, req.namespace, w)))


def _validation(action: str) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        broker = ValidationBroker.of(r.engine)
        op = broker.approve if action == "approve" else broker.reject
        return 200, op(req.namespace, req.params["task_id"], req.body)
    return handler


def _poll_activity(r: Routes, req: Request) -> Tuple[int, Any]:
    def replay(task_id: str, attempt: Any, worker_id: str) -> Optional[Dict[str, Any]]:
        found = r.engine.store.select("activities", "task_id = ? AND state = 'leased'", (task_id,), limit=1)
        return activities.describe_task(found[0], r.engine) if found and found[0]["lease_owner"] == worker_id \
            else None

    def claim(q: str, w: str, p: int, types: Optional[List[str]]) -> Optional[Dict[str, Any]]:
        act = activities.claim(r.engine, req.namespace, q, w, types)
        return None if act is None else activities.describe_task(act, r.engine)

    return 200, r.long_poll(req, "activity", claim, replay)


def _poll_query(r: Routes, req: Request) -> Tuple[int, Any]:
    return 200, r.long_poll(req, "query", lambda q, w, p, types: r.broker.claim(req.namespace, q, w, types))


def _wft(op: Callable[..., Dict[str, Any]]) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        return _tx(r, lambda: op(r.engine, req.namespace, req.params["task_id"], req.body))
    return handler


def _act(op: str) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        fn = {"complete": activities.complete, "fail": activities.fail, "heartbeat": activities.heartbeat}[op]
        return _tx(r, lambda: fn(r.engine, req.namespace, req.params["task_id"], req.body))
    return handler


def _query_complete(r: Routes, req: Request) -> Tuple[int, Any]:
    return 200, r.broker.complete(req.params["task_id"], req.body, namespace=req.namespace)


def _query_fail(r: Routes, req: Request) -> Tuple[int, Any]:
    return 200, r.broker.fail(req.params["task_id"], req.body, namespace=req.namespace)


# -- control plane -------------------------------------------------------------------------------
def _start(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: control.start_workflow(r.engine, req.namespace, req.body), 201)


def _list(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: control.list_workflows(r.engine, req.namespace, req.query))


def _describe(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: control.describe(r.engine, req.namespace, req.params["workflow_id"]))


def _runs(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: control.runs(r.engine, req.namespace, req.params["workflow_id"]))


def _describe_run(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return _tx(r, lambda: control.describe_run(r.engine, req.namespace, p["workflow_id"], p["run_id"]))


def _history(r: Routes, req: Request) -> Tuple[int, Any]:
    return history_route.serve(r.engine, req)


def _signal(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return _tx(r, lambda: control.signal(r.engine, req.namespace, p["workflow_id"], p.get("run_id"), p["name"],
                                         req.body), 202)


def _query(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return 200, control.query(r.engine, r.broker, req.namespace, p["workflow_id"], p.get("run_id"), p["name"],
                              req.body)


def _stream_append(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return _tx(r, lambda: streams.append(r.engine, req.namespace, p["workflow_id"], p["stream"], req.body), 202)


def _update(r: Routes, req: Request) -> Tuple[int, Any]:
    p = req.params
    return updates.submit(r.engine, req.namespace, p["workflow_id"], p.get("run_id"), p["name"], req.body)


def _cancel(terminate: bool) -> Handler:
    def handler(r: Routes, req: Request) -> Tuple[int, Any]:
        p = req.params
        return _tx(r, lambda: control.cancel(r.engine, req.namespace, p["workflow_id"], p.get("run_id"), req.body,
                                             terminate=terminate))
    return handler


def _start_activity(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: control.start_activity(r.engine, req.namespace, req.body), 201)


def _describe_activity(r: Routes, req: Request) -> Tuple[int, Any]:
    # A read (a Celery result's every look): its transaction begins at a write, so it executes no
    # BEGIN IMMEDIATE / COMMIT; its reads hold the engine lock, as every writer does (Store.begin).
    with r.engine.round_tx():
        return 200, control.describe_activity(r.engine, req.namespace, req.params["activity_id"])


def _list_activities(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: control.list_activities(r.engine, req.namespace, req.query))


def _workers(r: Routes, req: Request) -> Tuple[int, Any]:
    q = req.query
    return _tx(r, lambda: workers.list_workers(r.engine, req.namespace, q.get("task_queue"), q.get("status")))


def _worker(r: Routes, req: Request) -> Tuple[int, Any]:
    return _tx(r, lambda: workers.get_worker(r.engine, req.namespace, req.params["worker_id"]))


_ID = r"(?P<{}>[^/]+)"


def _wire(template: str) -> str:
    """A worker-plane route of ``sync_worker.protocol.routes`` as this router's pattern."""
    return wire.API_PREFIX + re.sub(r"\{(\w+)\}", lambda match: _ID.format(match.group(1)), template)


_WF = "/api/workflows/" + _ID.format("workflow_id")
_RUN = _WF + "/runs/" + _ID.format("run_id")

_ROUTES: List[Tuple[str, str, Handler]] = [
    ("GET", "/api/health", _health),
    ("GET", "/api/ready", _ready),
    ("GET", _wire(wire.CLUSTER_INFO), _cluster_info),
    ("POST", _wire(wire.REGISTER), _register),
    ("POST", _wire(wire.HEARTBEAT), _heartbeat),
    ("POST", _wire(wire.DEREGISTER_FENCED), _deregister_fenced),
    ("DELETE", _wire(wire.DEREGISTER_LEGACY), _deregister_legacy),
    ("POST", _wire(wire.SESSIONS), _session_create),
    ("POST", _wire(wire.SESSION_HEARTBEAT), _session_heartbeat),
    ("DELETE", _wire(wire.SESSION), _session_close),
    ("POST", _wire(wire.poll_route("workflow")), _poll_workflow),
    ("POST", _wire(wire.task_route("workflow", "complete")), _wft(tasks.complete)),
    ("POST", _wire(wire.task_route("workflow", "fail")), _wft(tasks.fail)),
    ("POST", _wire(wire.task_route("workflow", "history")), _wft(tasks.history_page)),
    ("POST", _wire(wire.task_route("workflow", "heartbeat")), _wft(tasks.heartbeat)),
    ("POST", _wire(wire.poll_route("activity")), _poll_activity),
    ("POST", _wire(wire.task_route("activity", "complete")), _act("complete")),
    ("POST", _wire(wire.task_route("activity", "fail")), _act("fail")),
    ("POST", _wire(wire.task_route("activity", "heartbeat")), _act("heartbeat")),
    ("POST", _wire(wire.poll_route("query")), _poll_query),
    ("POST", _wire(wire.task_route("query", "complete")), _query_complete),
    ("POST", _wire(wire.task_route("query", "fail")), _query_fail),
    ("POST", _wire(wire.poll_route("update_validation")), _poll_validation),
    ("POST", _wire(wire.task_route("update_validation", "approve")), _validation("approve")),
    ("POST", _wire(wire.task_route("update_validation", "reject")), _validation("reject")),
    ("POST", "/api/workflows", _start),
    ("GET", "/api/workflows", _list),
    ("GET", _WF, _describe),
    ("GET", _WF + "/runs", _runs),
    ("GET", _RUN, _describe_run),
    ("GET", _RUN + "/history", _history),
    ("GET", _WF + "/history", _history),
    ("POST", _WF + "/signal/" + _ID.format("name"), _signal),
    ("POST", _RUN + "/signal/" + _ID.format("name"), _signal),
    ("POST", _WF + "/query/" + _ID.format("name"), _query),
    ("POST", _RUN + "/query/" + _ID.format("name"), _query),
    ("POST", _WF + "/update/" + _ID.format("name"), _update),
    ("POST", _WF + "/message-streams/" + _ID.format("stream") + "/messages", _stream_append),
    ("POST", _RUN + "/update/" + _ID.format("name"), _update),
    ("POST", _WF + "/cancel", _cancel(False)),
    ("POST", _RUN + "/cancel", _cancel(False)),
    ("POST", _WF + "/terminate", _cancel(True)),
    ("POST", _RUN + "/terminate", _cancel(True)),
    ("POST", "/api/activities", _start_activity),
    ("GET", "/api/activities", _list_activities),
    ("GET", "/api/activities/" + _ID.format("activity_id"), _describe_activity),
    ("GET", "/api/workers", _workers),
    ("GET", "/api/workers/" + _ID.format("worker_id"), _worker),
    ("DELETE", "/api/workers/" + _ID.format("worker_id"), _deregister_legacy),
]
_ROUTES.extend(operator_routes.ROUTES)
_ROUTES.extend(workflow_streams.ROUTES)

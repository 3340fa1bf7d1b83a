"""Workflow streams: run-scoped, offset-ordered output written by workflow code, read by clients.

As the real server (``app/Support/WorkflowStreamService.php``, ``WorkflowStreamCommandProcessor.php``,
``app/Http/Controllers/Api/WorkflowStreamController.php`` of durable-workflow/server):

* a ``record_side_effect`` command may carry a ``workflow_stream`` directive (``append``,
  ``close`` or ``error``). Its ``command_identity`` must be the task's durable command identity
  (the ``workflow_command_id`` the task's poll carried -- a signal task's: the signal's -- else the
  task id) and
  each appended item's ``idempotency_key`` must be ``dw-stream:<identity>:<ordinal>:<index>``;
  anything else refuses the completion (422, nothing recorded). The directive is applied in the
  completion's transaction and stripped: ``SideEffectRecorded`` is recorded as for any side effect;
* a stream opens on its first append (``last_offset`` -1, offsets from 0); an item whose
  idempotency key the stream already holds is deduplicated (its existing offset answered); a
  closed or errored stream refuses appends (409 ``stream_closed`` / ``stream_errored``); more
  than ``max_pending_items`` unread items (default 10,000) is 429 ``stream_full``; close is
  idempotent and keeps ``retention_seconds`` (default 3,600);
* ``GET /workflows/{id}/runs/{run}/streams`` lists a run's streams, ``.../streams/{name}``
  describes one, ``.../streams/{name}/items?from=&max_items=&wait_seconds=`` reads from an
  offset (1-500 items, a bounded long poll of up to 60 s), answering ``next_offset`` and
  ``terminal`` (closed and read to the end); pending items drop once a reader caught up;
  ``POST .../items`` appends from a client and ``POST .../close`` closes or errors.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from . import messages
from .engine import Engine
from .store import Row
from .util import ApiError, iso

if TYPE_CHECKING:
    from .routes import Request, Routes

__all__ = ["ROUTES", "apply_directive", "validate_directive"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,190}$")
DEFAULT_MAX_PENDING_ITEMS = 10000
MAX_ITEMS_PER_APPEND = 500
DEFAULT_ITEMS_PER_READ = 100
MAX_ITEMS_PER_READ = 500
MAX_WAIT_SECONDS = 60
DEFAULT_RETENTION_SECONDS = 3600


def _bad(message: str, reason: str = "invalid_request", status: int = 400) -> ApiError:
    return ApiError(status, reason, message)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise _bad("invalid stream name", "invalid_stream_name")
    return name


def _key(namespace: str, run_id: str, name: str) -> str:
    return f"{namespace}\0wstream\0{run_id}\0{name}"


def _item_key(stream_key: str, offset: int) -> str:
    return f"{stream_key}\0item\0{offset:012d}"


def _view(stream: Row) -> Dict[str, Any]:
    return {name: stream.get(name) for name in (
        "stream_name", "status", "last_offset", "total_items", "pending_items", "opened_at", "last_appended_at",
        "closed_at", "error_reason", "retention_seconds")}


def _stream(engine: Engine, namespace: str, run_id: str, name: str) -> Optional[Row]:
    return engine.store.get("kv", _key(namespace, run_id, _check_name(name)))


def _require(engine: Engine, namespace: str, run_id: str, name: str) -> Row:
    stream = _stream(engine, namespace, run_id, name)
    if stream is None:
        raise ApiError(404, "stream_not_found", "Stream not found.")
    return stream


# -- the service -------------------------------------------------------------------------------


def append(engine: Engine, namespace: str, run: Row, name: str, items: List[Dict[str, Any]],
           max_pending: int = DEFAULT_MAX_PENDING_ITEMS) -> Dict[str, Any]:
    key = _key(namespace, run["run_id"], _check_name(name))
    if not items:
        raise _bad("append requires at least one item")
    if len(items) > MAX_ITEMS_PER_APPEND:
        raise _bad(f"append accepts at most {MAX_ITEMS_PER_APPEND} items per request")
    stream = engine.store.get("kv", key) or {
        "key": key, "namespace": namespace, "kind": "wstream", "run_id": run["run_id"], "stream_name": name,
        "status": "open", "last_offset": -1, "total_items": 0, "pending_items": 0,
        "opened_at": iso(engine.now()), "last_appended_at": None, "closed_at": None, "error_reason": None,
        "retention_seconds": None, "keys": {}}
    if stream["status"] == "closed":
        raise ApiError(409, "stream_closed", "Stream is closed.")
    if stream["status"] == "errored":
        raise ApiError(409, "stream_errored", "Stream is errored.")
    stamp = iso(engine.now())
    offsets: List[int] = []
    deduped = 0
    full = False
    for item in items:
        if not isinstance(item, dict):
            raise _bad("each item must be an associative array")
        idem = item.get("idempotency_key") or None
        if idem is not None and str(idem) in stream["keys"]:
            offsets.append(int(stream["keys"][str(idem)]))
            deduped += 1
            continue
        if stream["pending_items"] >= max_pending:
            full = True
            break
        offset = int(stream["last_offset"]) + 1
        engine.store.put("kv", {
            "key": _item_key(key, offset), "namespace": namespace, "kind": "wstream_item", "offset": offset,
            "idempotency_key": idem, "origin": item.get("origin") or "workflow_command",
            "origin_reference": item.get("origin_reference"), "item_type": item.get("item_type"),
            "content_type": item.get("content_type"), "payload": item.get("payload"),
            "payload_reference": item.get("payload_reference"), "payload_codec": item.get("payload_codec"),
            "emitted_at": stamp})
        if idem is not None:
            stream["keys"][str(idem)] = offset
        stream.update({"last_offset": offset, "total_items": stream["total_items"] + 1,
                       "pending_items": stream["pending_items"] + 1, "last_appended_at": stamp})
        offsets.append(offset)
    engine.store.put("kv", stream)
    if full:
        raise ApiError(429, "stream_full", "Stream pending-items cap reached; consumer is draining too slowly.",
                       pending_items=stream["pending_items"], max_pending_items=max_pending)
    return {"stream": _view(stream), "accepted_offsets": offsets, "accepted": len(offsets) - deduped,
            "deduped": deduped}


def read(engine: Engine, namespace: str, run: Row, name: str, start: int, limit: int) -> Dict[str, Any]:
    stream = _require(engine, namespace, run["run_id"], name)
    key = stream["key"]
    rows = engine.store.select("kv", "key >= ? AND key < ?", (_item_key(key, max(0, start)), key + "\0item\x01"),
                               order="key", limit=max(1, min(limit, MAX_ITEMS_PER_READ)))
    next_offset = int(rows[-1]["offset"]) + 1 if rows else start
    if rows and int(rows[-1]["offset"]) == int(stream["last_offset"]) and stream["pending_items"] > 0:
        stream["pending_items"] = max(0, int(stream["last_offset"]) + 1 - next_offset)  # the reader caught up
        engine.store.put("kv", stream)
    items = [{name: row.get(name) for name in (
        "offset", "idempotency_key", "origin", "origin_reference", "item_type", "content_type", "payload",
        "payload_reference", "payload_codec", "emitted_at")} for row in rows]
    terminal = stream["status"] in ("closed", "errored") and next_offset > int(stream["last_offset"])
    return {"stream": _view(stream), "items": items, "next_offset": next_offset, "terminal": terminal}


def close(engine: Engine, namespace: str, run: Row, name: str, error_reason: Optional[str],
          retention_seconds: Optional[int]) -> Dict[str, Any]:
    stream = _require(engine, namespace, run["run_id"], name)
    if stream["status"] not in ("closed", "errored"):
        stream.update({"status": "closed" if error_reason is None else "errored", "error_reason": error_reason,
                       "closed_at": iso(engine.now())})
        if retention_seconds is not None and retention_seconds > 0:
            stream["retention_seconds"] = retention_seconds
        elif stream.get("retention_seconds") is None:
            stream["retention_seconds"] = DEFAULT_RETENTION_SECONDS
        engine.store.put("kv", stream)
    return _view(stream)


# -- the workflow command directive -----------------------------------------------------------


def validate_directive(cmd: Dict[str, Any], index: int) -> None:
    """The shape checks that need no task (done with the other command checks, before anything)."""
    directive = cmd.get("workflow_stream")
    if directive is None:
        return
    if cmd.get("type") != "record_side_effect" or not isinstance(directive, dict):
        raise _refused(index, "workflow_stream directives require a record_side_effect workflow command")
    ordinal = directive.get("command_ordinal")
    if type(ordinal) is not int or ordinal < 0:
        raise _refused(index, "workflow_stream command_ordinal must be a non-negative integer")
    if not isinstance(directive.get("stream_name"), str) or not directive["stream_name"].strip():
        raise _refused(index, "workflow_stream stream_name is required")
    operation = directive.get("operation")
    if operation == "append":
        items = directive.get("items")
        if not isinstance(items, list) or not items or not all(isinstance(item, dict) for item in items):
            raise _refused(index, "workflow_stream append requires items (objects)")
    elif operation == "error":
        reason = directive.get("error_reason")
        if not isinstance(reason, str) or not reason.strip():
            raise _refused(index, "workflow_stream error requires a non-empty error_reason")
    elif operation != "close":
        raise _refused(index, f"unsupported workflow_stream operation at command {index}")


def _refused(index: int, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"commands.{index}: {message}",
                    errors={f"commands.{index}.workflow_stream": [message]},
                    validation_errors={f"commands.{index}.workflow_stream": [message]})


def apply_directive(engine: Engine, run: Row, task: Row, cmd: Dict[str, Any], index: int) -> None:
    """Apply a completion's directive (the completion's transaction: a refusal records nothing)."""
    directive = cmd.pop("workflow_stream", None)
    if directive is None:
        return
    carried = messages.carried(task) or {}  # a signal task's poll carries the signal's command id
    identity = carried.get("workflow_command_id") or task.get("workflow_command_id") or task["task_id"]
    if directive.get("command_identity") != identity:
        raise _refused(index, "workflow_stream command_identity must match the durable workflow command identity")
    try:
        _apply(engine, run, directive, identity, index)
    except ApiError as error:
        if error.status in (400, 404):  # (a 404 on a task route would read as "no such task")
            raise _refused(index, f"workflow_stream {error.reason}: {error}") from None
        raise  # 409 stream_closed / stream_errored, 429 stream_full: as the stream service answers


def _apply(engine: Engine, run: Row, directive: Dict[str, Any], identity: str, index: int) -> None:
    name = str(directive["stream_name"])
    if directive["operation"] == "append":
        items = []
        for item_index, item in enumerate(directive["items"]):
            if item.get("idempotency_key") != f"dw-stream:{identity}:{directive['command_ordinal']}:{item_index}":
                raise _refused(index, "workflow_stream item idempotency_key must derive from durable command identity")
            items.append({**item, "origin": "workflow_command", "origin_reference": identity})
        maximum = directive.get("max_pending_items")
        append(engine, run["namespace"], run, name, items,
               int(maximum) if type(maximum) is int and maximum > 0 else DEFAULT_MAX_PENDING_ITEMS)
    else:
        reason = directive.get("error_reason") if directive["operation"] == "error" else None
        retention = directive.get("retention_seconds")
        close(engine, run["namespace"], run, name, reason, int(retention) if type(retention) is int else None)


# -- routes -----------------------------------------------------------------------------------


def _run(r: Routes, req: Request) -> Row:
    p = req.params
    try:
        return r.engine.require_run(req.namespace, p["workflow_id"], p["run_id"])
    except ApiError as error:
        if error.status == 404:
            raise ApiError(404, "instance_not_found", "Workflow run not found.") from None
        raise


def _envelope(req: Request, body: Dict[str, Any]) -> Dict[str, Any]:
    return {"workflow_id": req.params["workflow_id"], "workflow_run_id": req.params["run_id"], **body}


def _int_arg(query: Dict[str, str], name: str, default: int, low: int, high: Optional[int]) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ApiError(422, "validation_failed", f"{name} must be an integer {bound}",
                       errors={name: [f"must be an integer {bound}"]})
    return value


def _list(r: Routes, req: Request) -> Tuple[int, Any]:
    with r.engine.tx():
        run = _run(r, req)
        prefix = f"{req.namespace}\0wstream\0{run['run_id']}\0"
        rows = [row for row in r.engine.store.select("kv", "kind = ? AND key >= ? AND key < ?",
                                                     ("wstream", prefix, prefix + "\x7f"), order="key")]
        return 200, _envelope(req, {"count": len(rows), "streams": [_view(row) for row in rows]})


def _describe(r: Routes, req: Request) -> Tuple[int, Any]:
    with r.engine.tx():
        run = _run(r, req)
        return 200, _envelope(req, {"stream": _view(_require(r.engine, req.namespace, run["run_id"],
                                                             req.params["stream"]))})


def _items(r: Routes, req: Request) -> Tuple[int, Any]:
    start = _int_arg(req.query, "from", 0, 0, None)
    limit = _int_arg(req.query, "max_items", DEFAULT_ITEMS_PER_READ, 1, MAX_ITEMS_PER_READ)
    wait = _int_arg(req.query, "wait_seconds", 0, 0, MAX_WAIT_SECONDS)
    deadline = time.monotonic() + wait
    while True:
        with r.engine.tx():
            page = read(r.engine, req.namespace, _run(r, req), req.params["stream"], start, limit)
        if page["items"] or page["terminal"] or time.monotonic() >= deadline:
            return 200, _envelope(req, page)
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))  # a bounded long poll, as the server's


_ITEM_TEXT = {"payload_reference": 191, "payload_codec": 64, "idempotency_key": 191, "origin": 64,
              "origin_reference": 191, "item_type": 64, "content_type": 191}


def _append(r: Routes, req: Request) -> Tuple[int, Any]:
    body = req.body if isinstance(req.body, dict) else {}
    items = body.get("items")
    if not isinstance(items, list) or not items or len(items) > MAX_ITEMS_PER_APPEND:
        raise ApiError(422, "validation_failed", f"items must be a list of 1-{MAX_ITEMS_PER_APPEND} objects",
                       errors={"items": ["required"]})
    for index, item in enumerate(items):  # the controller's rules (nullable strings with a maximum length)
        for name, limit in _ITEM_TEXT.items():
            value = item.get(name) if isinstance(item, dict) else None
            if value is not None and (not isinstance(value, str) or len(value) > limit):
                message = f"must be a string of at most {limit} characters"
                raise ApiError(422, "validation_failed", f"items.{index}.{name} {message}",
                               errors={f"items.{index}.{name}": [message]})
    maximum = body.get("max_pending_items")
    if maximum is not None and (type(maximum) is not int or maximum < 1):
        raise ApiError(422, "validation_failed", "max_pending_items must be an integer >= 1",
                       errors={"max_pending_items": ["must be an integer >= 1"]})
    with r.engine.tx():
        run = _run(r, req)
        return 200, _envelope(req, append(r.engine, req.namespace, run, req.params["stream"], list(items),
                                          maximum or DEFAULT_MAX_PENDING_ITEMS))


def _close(r: Routes, req: Request) -> Tuple[int, Any]:
    body = req.body if isinstance(req.body, dict) else {}
    reason, retention = body.get("error_reason"), body.get("retention_seconds")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 191):
        raise ApiError(422, "validation_failed", "error_reason must be a string", errors={"error_reason": ["string"]})
    if retention is not None and (type(retention) is not int or retention < 1):
        raise ApiError(422, "validation_failed", "retention_seconds must be an integer >= 1",
                       errors={"retention_seconds": ["must be an integer >= 1"]})
    with r.engine.tx():
        run = _run(r, req)
        return 200, _envelope(req, {"stream": close(r.engine, req.namespace, run, req.params["stream"], reason or None,
                                                    retention)})


Handler = Callable[["Routes", "Request"], Tuple[int, Any]]
_ID = r"(?P<{}>[^/]+)"
_STREAMS = "/api/workflows/" + _ID.format("workflow_id") + "/runs/" + _ID.format("run_id") + "/streams"
ROUTES: List[Tuple[str, str, Handler]] = [
    ("GET", _STREAMS, _list),
    ("GET", _STREAMS + "/" + _ID.format("stream"), _describe),
    ("GET", _STREAMS + "/" + _ID.format("stream") + "/items", _items),
    ("POST", _STREAMS + "/" + _ID.format("stream") + "/items", _append),
    ("POST", _STREAMS + "/" + _ID.format("stream") + "/close", _close),
]

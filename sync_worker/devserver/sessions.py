"""Worker sessions (protocol §3.4): session leases and the routing of session-pinned activities.

The dev server follows the engine's published contract, which the server implements
(durable-workflow/workflow ``docs/architecture/worker-sessions.md``,
``src/V2/Support/WorkerProtocolVersion.php::workerSessionSemantics`` and
``resources/conformance/suite-v41/platform-protocol-specs/worker-sessions-runtime.schema.json``;
the server mirror we have predates its ``WorkerSessionController``):

* a session is a lease on ``(namespace, session_id)`` owned by one registered worker; it is
  created explicitly (``POST /worker/sessions``) or lazily, when the first activity of the
  session is admitted to a capable worker (``create_if_missing``);
* an activity scheduled with ``worker_session`` is routed by queue first, then admitted only to
  a worker whose registration ``capabilities`` cover the session's ``requirements`` and that
  holds the session (or may create / reacquire it), at most ``max_concurrent_activities`` of the
  session leased at once, at most ``max_concurrent_worker_sessions`` sessions per worker;
* the lease is renewed by the session heartbeat, by an admitted activity and by activity
  heartbeats; it ends by explicit close (terminal), TTL expiry (terminal, ``ttl_expired``),
  lease expiry (``expired``, ``lease_expired``) or the holder's registration going stale or
  away (``orphaned``, ``worker_heartbeat_stale``). The scheduler checks leases every tick;
* after holder loss a capable worker may reacquire the session when
  ``allow_reacquire_after_failure`` (the default); in-flight attempts keep their own leases and
  at-least-once retries. When the session can never be held again (closed, TTL expired, or lost
  with reacquisition disallowed: the contract's ``terminal_conditions``) its pending activities
  could never be admitted; the dev server fails each with ``ActivityFailed`` (non-retryable,
  ``exception_type`` ``WorkerSessionLost``, ``code`` the contract's refusal reason
  ``session_closed`` / ``session_reacquire_disallowed``, ``failure_category`` ``internal``: the
  engine's ``FailureCategory::Internal``, "worker crash"), so the run can catch it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import workers
from .engine import Engine
from .store import Row
from .util import ApiError, iso, require_str

__all__ = ["affinity", "admit", "check_options", "close", "create", "heartbeat", "holder_gone", "refuse_if_lost",
           "released", "renew_from_activity", "semantics", "sweep"]

_MAX_TEXT = 255
_DEFAULTS = {"lease_seconds": 120, "ttl_seconds": 1800, "max_concurrent_activities": 1,
             "create_if_missing": True, "allow_reacquire_after_failure": True}
_OPTION_KEYS = ("session_id", "queue", "requirements", *_DEFAULTS)


def semantics() -> Dict[str, Any]:
    """The ``worker_sessions`` entry of ``server_capabilities`` (the engine's semantics, abridged)."""
    return {"supported": True, "feature": "worker_sessions", "contract_version": "1.0",
            "minimum_protocol_version": "1.8", "command_field": "worker_session",
            "verbs": ["create", "heartbeat", "close"], "default_max_concurrent_activities": 1,
            "failure_detection": ["lease_expiry", "registered_worker_heartbeat_staleness"],
            "statuses": ["active", "closed", "expired", "failed", "orphaned"], "terminal_statuses": ["closed"]}


# -- options --------------------------------------------------------------------------------------
def check_options(raw: Any, prefix: str, reason: str = "invalid_worker_session") -> Dict[str, Any]:
    """The normalized options of a ``worker_session`` object; 422 naming each bad field otherwise."""
    def bad(field: str, message: str) -> ApiError:
        key = f"{prefix}.{field}" if prefix else field
        return _refused(422, reason, f"{key} {message}", errors={key: [message]}, validation_errors={key: [message]})

    if not isinstance(raw, dict):
        raise bad("", "must be an object") if prefix else _refused(422, reason, "the body must be an object")
    session_id = raw.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id.strip()) > _MAX_TEXT:
        raise bad("session_id", f"must be a non-empty string of at most {_MAX_TEXT} characters")
    out: Dict[str, Any] = {"session_id": session_id.strip()}
    queue = raw.get("queue")
    if queue is not None and (not isinstance(queue, str) or not queue.strip() or len(queue) > _MAX_TEXT):
        raise bad("queue", "must be a non-empty string when provided")
    out["queue"] = queue
    requirements = raw.get("requirements", [])
    if requirements is None:
        requirements = []
    if not isinstance(requirements, list) or any(not isinstance(r, str) or not r.strip() or len(r) > _MAX_TEXT
                                                   for r in requirements):
        raise bad("requirements", "must be a list of non-empty strings")
    out["requirements"] = list(dict.fromkeys(r.strip() for r in requirements))
    for key, default in _DEFAULTS.items():
        value = raw.get(key, default)
        if value is None:
            value = default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise bad(key, "must be a boolean")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad(key, "must be a whole number of at least 1")
        out[key] = value
    return out


# -- rows -----------------------------------------------------------------------------------------
def _key(namespace: str, session_id: str) -> str:
    return f"{namespace}\0{session_id}"


def _get(engine: Engine, namespace: str, session_id: str) -> Optional[Row]:
    return engine.store.get("worker_sessions", _key(namespace, session_id))


def _holder(engine: Engine, namespace: str, worker_id: Optional[str]) -> Optional[Row]:
    return workers.lookup(engine, namespace, worker_id) if worker_id else None


def _holder_live(engine: Engine, worker: Optional[Row]) -> bool:
    return worker is not None and worker["status"] == "active" and \
        engine.now() - float(worker.get("last_seen_at") or 0) <= engine.config.stale_after_seconds


def snapshot(engine: Engine, sess: Row) -> Dict[str, Any]:
    """The schema's ``workerSessionSnapshot``."""
    worker = _holder(engine, sess["namespace"], sess.get("lease_owner"))
    holder = None if worker is None else {
        "worker_id": worker["worker_id"], "task_queue": worker.get("task_queue"), "status": worker.get("status"),
        "last_heartbeat_at": iso(worker.get("last_heartbeat_at")), "is_stale": not _holder_live(engine, worker)}
    return {
        "session_id": sess["session_id"], "namespace": sess["namespace"], "connection": None, "queue": sess["queue"],
        "requirements": list(sess["requirements"]), "status": sess["status"], "lease_owner": sess.get("lease_owner"),
        "holder": holder, "lease_expires_at": iso(sess.get("lease_expires_at")),
        "ttl_expires_at": iso(sess.get("ttl_expires_at")), "closed_at": iso(sess.get("closed_at")),
        "failure_reason": sess.get("failure_reason"), "lease_seconds": sess["lease_seconds"],
        "ttl_seconds": sess["ttl_seconds"], "max_concurrent_activities": sess["max_concurrent_activities"],
        "create_if_missing": sess["create_if_missing"],
        "allow_reacquire_after_failure": sess["allow_reacquire_after_failure"],
        "active_activity_count": _leased_count(engine, sess), "last_heartbeat_at": iso(sess.get("last_heartbeat_at")),
        "created_at": iso(sess.get("created_at")), "updated_at": iso(sess.get("updated_at")),
    }


def affinity(engine: Engine, act: Row) -> Optional[Dict[str, Any]]:
    """``task.worker_session`` (the schema's ``workerSessionTaskAffinity``) of a pinned activity."""
    options = act.get("worker_session")
    if not isinstance(options, dict):
        return None
    sess = _get(engine, act["namespace"], options["session_id"])
    out = {k: v for k, v in options.items() if v is not None}
    if sess is not None:
        out.update({"status": sess["status"], "lease_owner": sess.get("lease_owner"),
                    "lease_expires_at": iso(sess.get("lease_expires_at")),
                    "ttl_expires_at": iso(sess.get("ttl_expires_at"))})
    return out


def _leased_count(engine: Engine, sess: Row) -> int:
    leased = engine.store.select("activities", "namespace = ? AND state = 'leased'", (sess["namespace"],))
    return sum(1 for act in leased if (act.get("worker_session") or {}).get("session_id") == sess["session_id"])


def _new(engine: Engine, namespace: str, options: Dict[str, Any], worker_id: str) -> Row:
    ts = engine.now()
    sess: Row = {"key": _key(namespace, options["session_id"]), "namespace": namespace, **options,
                 "status": "active", "lease_owner": worker_id, "lease_expires_at": ts + options["lease_seconds"],
                 "ttl_expires_at": ts + options["ttl_seconds"], "closed_at": None, "failure_reason": None,
                 "created_at": ts, "updated_at": ts, "last_heartbeat_at": None}
    engine.store.put("worker_sessions", sess)
    return sess


def _take(engine: Engine, sess: Row, worker_id: str) -> None:
    """Reacquire a lost (expired / orphaned / failed) session for ``worker_id``."""
    ts = engine.now()
    sess.update({"status": "active", "lease_owner": worker_id, "lease_expires_at": ts + sess["lease_seconds"],
                 "failure_reason": None, "updated_at": ts})
    engine.store.put("worker_sessions", sess)


def _held_by(engine: Engine, namespace: str, worker_id: str) -> int:
    return len(engine.store.select("worker_sessions", "namespace = ? AND status = 'active' AND lease_owner = ?",
                                   (namespace, worker_id)))


def _limit(worker: Row) -> int:
    raw = worker.get("max_concurrent_worker_sessions")
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1 else 10


def _missing(worker: Row, requirements: List[str]) -> List[str]:
    offered = set(c for c in worker.get("capabilities") or [] if isinstance(c, str))
    return [r for r in requirements if r not in offered]


# -- liveness -------------------------------------------------------------------------------------
def _loss(engine: Engine, sess: Row) -> Optional[Tuple[str, str]]:
    """``(status, failure_reason)`` an active session falls to now, or None while it holds."""
    if sess["status"] != "active":
        return None
    ts = engine.now()
    if ts >= sess["ttl_expires_at"]:
        return "closed", "ttl_expired"
    if not _holder_live(engine, _holder(engine, sess["namespace"], sess.get("lease_owner"))):
        return "orphaned", "worker_heartbeat_stale"
    if ts >= sess["lease_expires_at"]:
        return "expired", "lease_expired"
    return None


def _refresh(engine: Engine, sess: Row) -> None:
    """Apply TTL, holder liveness and lease expiry to an active session (the caller holds a tx)."""
    lost = _loss(engine, sess)
    if lost is None:
        return
    status, why = lost
    ts = engine.now()
    sess.update({"status": status, "failure_reason": why, "updated_at": ts})
    if status == "closed":
        sess["closed_at"] = ts
    engine.store.put("worker_sessions", sess)
    _after_loss(engine, sess)


def _dead_reason(sess: Row) -> Optional[str]:
    """Why no worker can ever hold ``sess`` again (the contract's terminal conditions), else None."""
    if sess["status"] == "closed":
        return "session_closed"
    if sess["status"] != "active" and not sess["allow_reacquire_after_failure"]:
        return "session_reacquire_disallowed"
    return None


def _after_loss(engine: Engine, sess: Row) -> None:
    reason = _dead_reason(sess)
    pending = [act for act in engine.store.select("activities", "namespace = ? AND state IN ('ready', 'backoff')",
                                                  (sess["namespace"],))
               if (act.get("worker_session") or {}).get("session_id") == sess["session_id"]]
    if reason is None:  # reacquirable: waiting pollers may take it now
        for queue in sorted({act["task_queue"] for act in pending}):
            engine.notify(sess["namespace"], "activity", queue)
        return
    for act in pending:
        _fail(engine, act, sess, reason)


def _fail(engine: Engine, act: Row, sess: Row, reason: str) -> None:
    from .activities import fail_unadmittable

    why = sess.get("failure_reason") or ("closed" if sess["status"] == "closed" else sess["status"])
    message = (f"worker session {sess['session_id']} can no longer be held ({sess['status']}: {why}; "
               f"holder {sess.get('lease_owner')}): {reason}")
    fail_unadmittable(engine, act, {"message": message, "type": "WorkerSessionLost", "code": reason,
                                    "non_retryable": True,
                                    "details": None}, failure_category="internal")


def sweep(engine: Engine) -> None:
    """Scheduler tick: expire, orphan or TTL-close active sessions (each in the caller's lock)."""
    with engine.lock:
        keys = [row["key"] for row in engine.store.select("worker_sessions", "status = 'active'", ())
                if _loss(engine, row) is not None]
    for key in keys:
        with engine.tx():
            sess = engine.store.get("worker_sessions", key)
            if sess is not None:
                _refresh(engine, sess)


def holder_gone(engine: Engine, namespace: str, worker_id: str) -> None:
    """The worker deregistered: its sessions are orphaned now (the caller holds a tx)."""
    for sess in engine.store.select("worker_sessions", "namespace = ? AND status = 'active' AND lease_owner = ?",
                                    (namespace, worker_id)):
        _refresh(engine, sess)


def refuse_if_lost(engine: Engine, act: Row) -> bool:
    """Fail a pending pinned activity whose session can never be held again; True when it did."""
    options = act.get("worker_session")
    if not isinstance(options, dict) or act["state"] not in ("ready", "backoff"):
        return False
    sess = _get(engine, act["namespace"], options["session_id"])
    if sess is None:
        return False
    _refresh(engine, sess)
    if act["state"] not in ("ready", "backoff"):  # the refresh failed it already
        return True
    reason = _dead_reason(sess)
    if reason is None:
        return False
    _fail(engine, act, sess, reason)
    return True


# -- routing --------------------------------------------------------------------------------------
def admit(engine: Engine, namespace: str, worker_id: str, act: Row) -> bool:
    """May ``worker_id`` lease ``act``? An unpinned activity: yes. A pinned one: create, reuse or
    reacquire the session for this worker when the contract allows (the caller then leases it)."""
    options = act.get("worker_session")
    if not isinstance(options, dict):
        return True
    worker = workers.lookup(engine, namespace, worker_id)
    if worker is None or worker["status"] != "active" or _missing(worker, options["requirements"]):
        return False
    sess = _get(engine, namespace, options["session_id"])
    if sess is not None:
        _refresh(engine, sess)
    if sess is None:
        if not options["create_if_missing"] or _held_by(engine, namespace, worker_id) >= _limit(worker):
            return False
        _new(engine, namespace, options, worker_id)
        return True
    if sess["status"] == "active":
        if sess.get("lease_owner") != worker_id or _leased_count(engine, sess) >= sess["max_concurrent_activities"]:
            return False
        sess["lease_expires_at"] = max(sess["lease_expires_at"], engine.now() + sess["lease_seconds"])
        engine.store.put("worker_sessions", sess)
        return True
    if _dead_reason(sess) is not None or _held_by(engine, namespace, worker_id) >= _limit(worker):
        return False
    _take(engine, sess, worker_id)
    return True


def renew_from_activity(engine: Engine, act: Row) -> None:
    """An activity heartbeat renews its session's lease when its worker holds the session."""
    options = act.get("worker_session")
    if not isinstance(options, dict):
        return
    sess = _get(engine, act["namespace"], options["session_id"])
    if sess is None or sess["status"] != "active" or sess.get("lease_owner") != act.get("lease_owner"):
        return
    ts = engine.now()
    sess.update({"lease_expires_at": max(sess["lease_expires_at"], ts + sess["lease_seconds"]),
                 "last_heartbeat_at": ts, "updated_at": ts})
    engine.store.put("worker_sessions", sess)


def released(engine: Engine, act: Row) -> None:
    """A pinned attempt ended: the session's holder may lease the next one of the session."""
    if isinstance(act.get("worker_session"), dict):
        engine.notify(act["namespace"], "activity", act["task_queue"])


# -- routes ---------------------------------------------------------------------------------------
def _worker_for(engine: Engine, namespace: str, body: Dict[str, Any]) -> Row:
    worker_id = require_str(body, "worker_id")
    worker = workers.lookup(engine, namespace, worker_id)
    if worker is None or worker["status"] != "active":
        # as a poll from an unknown worker (server WorkerController::resolveRegisteredWorker): 412
        raise _refused(412, "worker_not_registered", f"worker {worker_id} is not registered; "
                       "call POST /worker/register first", worker_id=worker_id)
    return worker


def _refused(code: int, reason: str, message: str, **extra: Any) -> ApiError:
    """A refusal in the schema's ``workerSessionOperationResult`` shape (``admitted``/``status``/``reason``)."""
    error = ApiError(code, reason, message, admitted=False, **extra)
    error.extra["status"] = code
    return error


def _answer(engine: Engine, sess: Row, outcome: str) -> Dict[str, Any]:
    return {"admitted": True, "outcome": outcome, "session": snapshot(engine, sess), "status": 200, "reason": None}


def create(engine: Engine, namespace: str, body: Dict[str, Any]) -> Dict[str, Any]:
    """``POST /worker/sessions``: create, reuse or reacquire the session for the calling worker."""
    if not isinstance(body, dict):
        raise _refused(422, "invalid_worker_session", "the body must be an object")
    options = check_options({k: body.get(k) for k in _OPTION_KEYS if k in body}, "")
    worker = _worker_for(engine, namespace, body)
    worker_id = worker["worker_id"]
    if options["queue"] is not None and options["queue"] != worker.get("task_queue"):
        raise _refused(409, "session_queue_mismatch", f"worker {worker_id} polls {worker.get('task_queue')!r}, "
                       f"not the session's queue {options['queue']!r}", worker_id=worker_id)
    missing = _missing(worker, options["requirements"])
    if missing:
        raise _refused(409, "session_requirements_not_met", f"worker {worker_id} does not offer {missing}",
                       missing_requirements=missing, worker_id=worker_id)
    sess = _get(engine, namespace, options["session_id"])
    if sess is not None:
        _refresh(engine, sess)
    if sess is not None and sess["status"] == "active":
        if sess.get("lease_owner") != worker_id:
            raise _refused(409, "session_owned_by_another_worker",
                           f"session {options['session_id']} is held by another worker",
                           session=snapshot(engine, sess))
        sess["lease_expires_at"] = max(sess["lease_expires_at"], engine.now() + sess["lease_seconds"])
        engine.store.put("worker_sessions", sess)
        return _answer(engine, sess, "reused")
    if sess is not None:
        reason = _dead_reason(sess)
        if reason is not None:
            raise _refused(409, reason, f"session {options['session_id']} cannot be held again ({sess['status']})",
                           session=snapshot(engine, sess))
    elif not options["create_if_missing"]:
        raise _refused(404, "session_missing", f"session {options['session_id']} does not exist and "
                       "create_if_missing is false")
    if _held_by(engine, namespace, worker_id) >= _limit(worker):
        raise _refused(409, "worker_session_limit_exceeded", f"worker {worker_id} already holds its "
                       f"{_limit(worker)} sessions", max_concurrent_worker_sessions=_limit(worker))
    if sess is None:
        return _answer(engine, _new(engine, namespace, options, worker_id), "created")
    _take(engine, sess, worker_id)
    return _answer(engine, sess, "reacquired")


def _owned(engine: Engine, namespace: str, session_id: str, body: Dict[str, Any]) -> Row:
    if not isinstance(body, dict):
        raise _refused(422, "invalid_worker_session", "the body must be an object")
    worker_id = require_str(body, "worker_id")
    sess = _get(engine, namespace, session_id)
    if sess is None:
        raise _refused(404, "session_not_found", f"session {session_id} was not found", session_id=session_id)
    _refresh(engine, sess)
    if sess.get("lease_owner") != worker_id:
        raise _refused(409, "session_owner_mismatch", f"session {session_id} is not held by {worker_id}",
                       session=snapshot(engine, sess))
    return sess


def heartbeat(engine: Engine, namespace: str, session_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    """``POST /worker/sessions/{id}/heartbeat``: extend the holder's lease."""
    sess = _owned(engine, namespace, session_id, body)
    lease = body.get("lease_seconds", sess["lease_seconds"])
    if isinstance(lease, bool) or not isinstance(lease, int) or lease < 1:
        raise _refused(422, "invalid_worker_session", "lease_seconds must be a whole number of at least 1",
                       errors={"lease_seconds": ["must be a whole number of at least 1"]},
                       validation_errors={"lease_seconds": ["must be a whole number of at least 1"]})
    if sess["status"] != "active":
        raise _refused(409, "session_not_active", f"session {session_id} is {sess['status']}",
                       session=snapshot(engine, sess))
    ts = engine.now()
    sess.update({"lease_expires_at": min(ts + lease, sess["ttl_expires_at"]), "last_heartbeat_at": ts,
                 "updated_at": ts})
    engine.store.put("worker_sessions", sess)
    return {**_answer(engine, sess, "heartbeat_recorded")}


def close(engine: Engine, namespace: str, session_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    """``DELETE /worker/sessions/{id}``: the holder ends the session (terminal for its id)."""
    sess = _owned(engine, namespace, session_id, body)
    if sess["status"] == "closed":
        return _answer(engine, sess, "already_closed")
    ts = engine.now()
    reason = body.get("reason")
    sess.update({"status": "closed", "closed_at": ts, "updated_at": ts,
                 "close_reason": reason if isinstance(reason, str) else None})
    engine.store.put("worker_sessions", sess)
    _after_loss(engine, sess)
    return _answer(engine, sess, "closed")

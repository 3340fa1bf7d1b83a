"""``AsyncResult``, ``EagerResult``, ``GroupResult``: a task's state and result, read from the server.

An id names either a standalone activity (a task started with ``delay``/``apply_async``) or
a canvas workflow (a chain/group/chord, or a task started with ``countdown``/``eta``/``link``);
``AsyncResult`` looks the id up as an activity first, then as a workflow. Unknown ids are
``PENDING``, as in Celery.

State mapping (activity status → Celery state): scheduled → PENDING, running → STARTED when the
task tracks it (``track_started`` / ``task_track_started``, as in Celery; else PENDING) or the
custom state published with ``update_state``, retrying (a retry's delay) → RETRY, completed →
SUCCESS, failed → FAILURE, cancelled (revoked) or expired before it started → REVOKED. A canvas run
that has not finished is STARTED with ``task_track_started``, else PENDING.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

from . import states
from .canvas_workflow import ONE_TASK_MEMO
from .exceptions import RemoteTaskError, TaskRevokedError, TimeoutError

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["AsyncResult", "EagerResult", "GroupResult", "ResultBase", "ResultSet", "allow_join_result",
           "denied_join_result", "rebuild_exception", "result_from_tuple"]

_ACTIVITY_STATES = {"scheduled": states.PENDING, "running": states.STARTED, "retrying": states.RETRY,
                    "completed": states.SUCCESS, "failed": states.FAILURE, "cancelled": states.REVOKED,
                    "canceled": states.REVOKED}
_RUN_STATES = {"pending": states.PENDING, "running": states.STARTED, "waiting": states.STARTED,
               "completed": states.SUCCESS, "failed": states.FAILURE, "cancelled": states.REVOKED,
               "canceled": states.REVOKED, "terminated": states.REVOKED, "timed_out": states.FAILURE}


def rebuild_exception(exc_type: Optional[str], exc_class: Optional[str], message: str,
                      traceback: Optional[str] = None) -> BaseException:
    """The task's exception, as its own type when importable here, else :class:`RemoteTaskError`."""
    if exc_class and "." in exc_class:
        module_name, _, qualname = exc_class.rpartition(".")
        try:
            value: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                value = getattr(value, part)
            if isinstance(value, type) and issubclass(value, BaseException):
                args = message_args(value, message)
                try:
                    error = value(*args)
                except Exception:
                    error = value.__new__(value)
                    error.args = args
                return error
        except Exception:
            pass
    return RemoteTaskError(exc_type or "Exception", message, traceback, exc_class)


def message_args(cls: type, message: str) -> Tuple[Any, ...]:
    """The exception's arguments from its message: ``str(exc)`` of an exception raised with several
    arguments is ``str(exc.args)`` (``BaseException.__str__``), so such a message is read back as
    those arguments when it is a tuple of literals; any other message is the one argument."""
    if getattr(cls, "__str__", None) is BaseException.__str__ and message.startswith("(") and message.endswith(")"):
        try:
            value = ast.literal_eval(message)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return (message,)
        if isinstance(value, tuple) and len(value) > 1:
            return value
    return (message,)


@contextlib.contextmanager
def allow_join_result() -> Iterator[None]:
    """Celery's guard against ``.get()`` inside a task; waiting inside a task is allowed here."""
    yield


@contextlib.contextmanager
def denied_join_result() -> Iterator[None]:
    yield


def result_from_tuple(r: Any, app: Optional[Celery] = None) -> Any:
    """Rebuild a result from ``AsyncResult.as_tuple()``."""
    (task_id, parent), _ = r
    return AsyncResult(task_id, app=app, parent=result_from_tuple(parent, app) if parent else None)


class ResultBase:
    parent: Optional[ResultBase] = None


class AsyncResult(ResultBase):
    """The result of one task (or canvas) by id: ``state``, ``get()``, ``revoke()``..."""

    def __init__(self, id: str, backend: Any = None, task_name: Optional[str] = None, app: Optional[Celery] = None,
                 parent: Optional[ResultBase] = None) -> None:
        if id is None:
            raise ValueError(f"AsyncResult requires valid id, not {type(id)}")
        from .app import current_app

        self.id = str(id)
        self.app = app or current_app()
        self.task_name = task_name
        self.parent = parent
        self.children: List[ResultBase] = []
        self._cache: Optional[Dict[str, Any]] = None

    task_id = property(lambda self: self.id)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.id}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AsyncResult):
            return other.id == self.id
        return isinstance(other, str) and other == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    # -- reading the server ---------------------------------------------------------------------------

    def _meta(self) -> Dict[str, Any]:
        """``{"status", "result", "traceback"}`` as Celery's backends store it."""
        if self._cache is not None:
            return self._cache
        from sync_worker.errors import NotFound

        client = self.app.client
        meta: Dict[str, Any]
        try:
            meta = self._activity_meta(client.describe_activity(self.id).raw or {})
        except NotFound:
            meta = self._workflow_meta(client)
        if meta["status"] in states.READY_STATES:
            self._cache = meta
        return meta

    @staticmethod
    def _failure_meta(failure: Dict[str, Any], status: str = states.FAILURE) -> Dict[str, Any]:
        message = str(failure.get("message") or "")
        exc_type = failure.get("type") or failure.get("exception_type")
        exc_class = failure.get("class") or failure.get("exception_class")
        tb = failure.get("stack_trace")
        if exc_type == "ActivityCancelled" or (exc_type == "ActivityTimedOut" and "schedule-to-start" in message):
            return {"status": states.REVOKED, "result": TaskRevokedError(message or "revoked"), "traceback": None}
        return {"status": status, "result": rebuild_exception(exc_type, exc_class, message, tb), "traceback": tb}

    def _activity_meta(self, described: Dict[str, Any]) -> Dict[str, Any]:
        status = _ACTIVITY_STATES.get(str(described.get("activity_status")), states.PENDING)
        if described.get("status") in ("cancelled", "canceled", "terminated"):
            status = states.REVOKED
        if status == states.SUCCESS:
            from .replace import follow

            replaced_by = follow(described.get("result"))
            if replaced_by is not None:  # Task.replace(): the result is the replacement run's
                return AsyncResult(replaced_by, app=self.app)._meta()
            return {"status": status, "result": described.get("result"), "traceback": None}
        if status == states.FAILURE:
            return self._failure_meta(described.get("failure") or {})
        if status == states.REVOKED:
            return {"status": status, "result": TaskRevokedError(str(described.get("closed_reason") or "revoked")),
                    "traceback": None}
        if status == states.RETRY:
            last = described.get("last_failure") or {}
            cause = rebuild_exception(last.get("type"), last.get("class"), str(last.get("message") or ""))
            return {"status": status, "result": cause, "traceback": last.get("stack_trace")}
        details = described.get("heartbeat_details")
        if status == states.STARTED and isinstance(details, dict) and details.get("celery_state"):
            return {"status": str(details["celery_state"]), "result": details.get("meta"), "traceback": None}
        if status == states.STARTED and not self._tracks_started(described.get("activity_type")):
            status = states.PENDING
        return {"status": status, "result": None, "traceback": None}

    def _tracks_started(self, task_name: Any) -> bool:
        """Celery stores STARTED only for a task with ``track_started`` (or ``task_track_started``)."""
        task = self.app.tasks.get(str(task_name)) if task_name else None
        tracked = getattr(task, "track_started", False) if task is not None else False
        return bool(tracked or self.app.conf.get("task_track_started"))

    def _workflow_meta(self, client: Any) -> Dict[str, Any]:
        from sync_worker.errors import NotFound

        try:
            execution = client.describe_workflow(self.id)
        except NotFound:
            canvas_run = getattr(self, "canvas_run", None)  # set on a canvas step (result_graph)
            if canvas_run or "~" in self.id:
                return self._member_meta(client, canvas_run or self.id.partition("~")[0])
            return {"status": states.PENDING, "result": None, "traceback": None}
        status = _RUN_STATES.get(str(execution.status), states.STARTED)
        if status not in states.READY_STATES and (execution.memo or {}).get(ONE_TASK_MEMO):
            # as in Celery, the task's result is ready when it is, not when its callbacks are
            task_meta = self._one_task_meta(client)
            if task_meta is not None:
                return task_meta
        if status == states.SUCCESS:
            return {"status": status, "result": execution.output, "traceback": None}
        if status == states.FAILURE:
            failure = dict(execution.raw.get("failure") or {})
            raw_exception = failure.get("exception")
            exception: Dict[str, Any] = raw_exception if isinstance(raw_exception, dict) else {}
            merged = {"message": failure.get("message"), "type": failure.get("exception_type") or exception.get("type"),
                      "class": failure.get("exception_class") or exception.get("class")}
            return self._failure_meta(merged)
        if status == states.REVOKED:
            return {"status": status, "result": TaskRevokedError("revoked"), "traceback": None}
        if status == states.STARTED and not self._tracks_started(None):
            status = states.PENDING
        return {"status": status, "result": None, "traceback": None}

    def _one_task_meta(self, client: Any) -> Optional[Dict[str, Any]]:
        """The outcome of a one-task run's task while its callbacks still run (None until it has one)."""
        from .canvas_workflow import MEMBERS_QUERY

        try:
            members = client.query_workflow(self.id, MEMBERS_QUERY).get("result")
        except Exception:
            return None
        entry = members.get(self.id) if isinstance(members, dict) else None
        if not isinstance(entry, dict):
            return None
        if entry.get("state") == states.SUCCESS:
            return {"status": states.SUCCESS, "result": entry.get("result"), "traceback": None}
        if entry.get("state") == states.FAILURE:
            return self._failure_meta({"message": entry.get("error"), "type": entry.get("type"),
                                       "class": entry.get("class")})
        return None

    def _member_meta(self, client: Any, root_id: str) -> Dict[str, Any]:
        """A canvas member (``<root>~<n>``): its state as the canvas run records it (a query)."""
        from .canvas_workflow import MEMBERS_QUERY

        root = AsyncResult(root_id, app=self.app)
        try:
            members = client.query_workflow(root_id, MEMBERS_QUERY).get("result")
        except Exception:
            members = None  # e.g. a failed run: it is not replayed to answer a query
        entry = members.get(self.id) if isinstance(members, dict) else None
        if isinstance(entry, dict):
            state = str(entry.get("state") or states.PENDING)
            if state == states.FAILURE:
                return {"status": state, "result": root.result if root.failed() else
                        RemoteTaskError("Exception", str(entry.get("error"))), "traceback": None}
            return {"status": state, "result": entry.get("result"), "traceback": None}
        if root.state in states.PROPAGATE_STATES:
            return {"status": root.state, "result": root.result, "traceback": root.traceback}
        return {"status": states.PENDING, "result": None, "traceback": None}

    # -- Celery's API ---------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return str(self._meta()["status"])

    status = state

    @property
    def result(self) -> Any:
        return self._meta()["result"]

    info = result

    @property
    def traceback(self) -> Optional[str]:
        value = self._meta()["traceback"]
        return str(value) if value else None

    def ready(self) -> bool:
        return self.state in states.READY_STATES

    def successful(self) -> bool:
        return self.state == states.SUCCESS

    def failed(self) -> bool:
        return self.state == states.FAILURE

    def get(self, timeout: Optional[float] = None, propagate: bool = True, interval: float = 0.5,
            no_ack: bool = True, follow_parents: bool = True, callback: Any = None, on_message: Any = None,
            on_interval: Any = None, disable_sync_subtasks: bool = True, EXCEPTION_STATES: Any = None,
            PROPAGATE_STATES: Any = None) -> Any:
        """Wait for the result; re-raise the task's exception if it failed (``propagate=True``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            meta = self._meta()
            if meta["status"] in states.READY_STATES:
                break
            if on_interval is not None:
                on_interval()
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("The operation timed out.")
            pause = interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic()))
            time.sleep(min(pause, 0.05) if pause > 0.05 and meta["status"] == states.PENDING else pause)
        if callback is not None:
            callback(self.id, meta["result"])
        if meta["status"] in states.PROPAGATE_STATES and propagate:
            raise meta["result"]
        return meta["result"]

    wait = get

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None, wait: bool = False,
               timeout: Optional[float] = None) -> None:
        """Revoke: it will not run (or retry); with ``terminate=True`` a running call is stopped too."""
        self.app.control.revoke(self.id, terminate=terminate, signal=signal)
        self._cache = None

    def revoke_by_stamped_headers(self, headers: Any, terminate: bool = False, signal: Any = None,
                                  wait: bool = False, timeout: Optional[float] = None) -> None:
        self.app.control.revoke_by_stamped_headers(headers, terminate=terminate)  # refused by name

    def forget(self) -> None:
        """Drop the cached state (the server keeps the history; there is nothing else to forget)."""
        self._cache = None

    def then(self, callback: Any, on_error: Any = None, weak: bool = False) -> Any:
        from .exceptions import UnsupportedFeature

        raise UnsupportedFeature("AsyncResult.then() (promise callbacks) is not supported; use link= instead")

    def as_tuple(self) -> Tuple[Any, ...]:
        parent = self.parent
        return ((self.id, parent.as_tuple() if isinstance(parent, (AsyncResult, GroupResult)) else None), None)

    def collect(self, intermediate: bool = False, **kwargs: Any) -> Iterator[Tuple[ResultBase, Any]]:
        yield self, self.get(**kwargs)

    @property
    def date_done(self) -> None:
        return None


class EagerResult(AsyncResult):
    """The result of a task run eagerly (``task_always_eager``, ``Task.apply()``)."""

    def __init__(self, id: str, ret_value: Any, state: str, traceback: Optional[str] = None,
                 name: Optional[str] = None) -> None:
        self.id = id
        self.task_name = name
        self.parent = None
        self.children = []
        self._result = ret_value
        self._state = states.SUCCESS if state == states.IGNORED else state
        self._traceback = traceback
        self._cache = {"status": self._state, "result": ret_value, "traceback": traceback}

    def _meta(self) -> Dict[str, Any]:
        return {"status": self._state, "result": self._result, "traceback": self._traceback}

    def revoke(self, *args: Any, **kwargs: Any) -> None:
        self._state = states.REVOKED

    def __repr__(self) -> str:
        return f"<EagerResult: {self.id}>"


class ResultSet(ResultBase):
    """A set of results (``GroupResult``'s base)."""

    def __init__(self, results: List[AsyncResult], app: Optional[Celery] = None) -> None:
        self.results = list(results)
        self._app = app

    def __iter__(self) -> Iterator[AsyncResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> AsyncResult:
        return self.results[index]

    def ready(self) -> bool:
        return all(r.ready() for r in self.results)

    def successful(self) -> bool:
        return all(r.successful() for r in self.results)

    def failed(self) -> bool:
        return any(r.failed() for r in self.results)

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        return sum(1 for r in self.results if r.successful())

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None, **kwargs: Any) -> None:
        for r in self.results:
            r.revoke(terminate=terminate, signal=signal)

    def get(self, timeout: Optional[float] = None, propagate: bool = True, interval: float = 0.5,
            **kwargs: Any) -> List[Any]:
        return self.join(timeout=timeout, propagate=propagate, interval=interval)

    def join(self, timeout: Optional[float] = None, propagate: bool = True, interval: float = 0.5,
             **kwargs: Any) -> List[Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        out = []
        for r in self.results:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            out.append(r.get(timeout=left, propagate=propagate, interval=interval))
        return out


class GroupResult(ResultSet):
    """The result of a group: one durable canvas workflow whose result is the list of member results.

    ``results`` are the members, in order; each member reads its state from the group's run.
    """

    def __init__(self, id: Optional[str] = None, results: Optional[List[AsyncResult]] = None,
                 parent: Optional[ResultBase] = None, app: Optional[Celery] = None) -> None:
        super().__init__(list(results or []), app=app)
        self.id = id
        self.parent = parent
        self._run = AsyncResult(id, app=app) if id else None

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(r.id for r in self.results)}]>"

    def _group(self) -> Optional[AsyncResult]:
        """The group's durable run (None for a group run eagerly: its members hold the results)."""
        if self._run is None or (self.results and all(isinstance(r, EagerResult) for r in self.results)):
            return None
        return self._run

    def ready(self) -> bool:
        run = self._group()
        return super().ready() if run is None else run.ready()

    def successful(self) -> bool:
        run = self._group()
        return super().successful() if run is None else run.successful()

    def failed(self) -> bool:
        run = self._group()
        return super().failed() if run is None else run.failed()

    def completed_count(self) -> int:
        run = self._group()
        if run is not None and run.successful():
            return len(self.results)
        if run is not None:
            return 0
        return super().completed_count()

    def join(self, timeout: Optional[float] = None, propagate: bool = True, interval: float = 0.5,
             **kwargs: Any) -> List[Any]:
        run = self._group()
        if run is None:
            return super().join(timeout=timeout, propagate=propagate, interval=interval)
        value = run.get(timeout=timeout, propagate=propagate, interval=interval)
        return list(value) if isinstance(value, (list, tuple)) else [value]

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None, **kwargs: Any) -> None:
        run = self._group()
        if run is None:
            super().revoke(terminate=terminate, signal=signal)
        else:
            run.revoke(terminate=terminate, signal=signal)

    def as_tuple(self) -> Tuple[Any, ...]:
        """Celery's ``((id, parent), [member tuples])`` (what a task returning this result stores)."""
        parent = self.parent
        return ((self.id, parent.as_tuple() if isinstance(parent, (AsyncResult, GroupResult)) else None),
                [r.as_tuple() for r in self.results])

    def save(self, backend: Any = None) -> None:
        """Nothing to save: the group's run is durable on the server."""

    @classmethod
    def restore(cls, id: str, backend: Any = None, app: Optional[Celery] = None) -> GroupResult:
        return cls(id, [], app=app)

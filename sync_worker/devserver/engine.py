"""The engine core: configuration, the single state lock, transactions, runs, history, wake rule.

Every state change happens inside :meth:`Engine.tx` (the lock plus one SQLite transaction),
so an operation that raises half way leaves nothing behind. Long polls wait on a
:class:`threading.Condition` per ``(namespace, kind, queue)`` that shares the same lock, which
``wait`` releases; producers ``notify`` the matching condition when they make work ready.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import namespaces
from .clock import Clock, SystemClock
from .encoding import StoredList
from .store import Row, Store
from .stranded import StrandedTypes
from .util import TERMINAL_STATUSES, ApiError, iso, ordered_id

log = logging.getLogger("sync_worker.devserver")

#: The events that close a run (a history read holding new events waits only for one of these).
CLOSING_EVENTS = frozenset({"WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled", "WorkflowTerminated",
                            "WorkflowTimedOut", "WorkflowContinuedAsNew"})

#: How many polls' leases :meth:`Engine.remember_poll` keeps.
_POLL_RECORDS = 20000


@dataclass
class Config:
    """Tunables; the defaults suit a development server, tests shorten the leases and ticks."""

    namespaces: Tuple[str, ...] = ("default",)
    token: Optional[str] = None
    worker_token: Optional[str] = None
    control_token: Optional[str] = None
    long_poll_max_seconds: float = 60.0
    workflow_task_lease_seconds: float = 60.0
    activity_task_lease_seconds: float = 300.0
    query_timeout_seconds: float = 10.0
    #: how long an update waits for its validator's verdict (the server's ``update_validation.timeout``)
    update_validation_timeout_seconds: float = 10.0
    tick_seconds: float = 0.05
    heartbeat_interval_seconds: int = 60
    stale_after_seconds: int = 120
    receipt_retention_seconds: int = 3600
    max_payload_bytes: int = 2 * 1024 * 1024
    max_request_bytes: int = 4 * 1024 * 1024
    enforce_workflow_timeouts: bool = True
    #: keep and hand back W3C trace-context carriers (off: as the real server, which has none)
    trace_context: bool = False
    #: let concurrent requests share one COMMIT (see :meth:`Engine.grouped`); off: one per transaction
    group_commit: bool = True


class QueueWaiters:
    """The long polls waiting on one ``(namespace, kind, queue)``, and the hand-off of wake-ups.

    Each piece of work made ready wakes one waiting poll (``notify(1)``), not all of them: with
    several pollers per queue, waking every one made each new task cost a thundering herd of
    thread switches and claim queries on the server's core, and the poll that won waited behind
    the others. A woken poll that then finds nothing it can take (another poll came in first,
    the task is for types or a session it does not serve, its client left, or its own wait
    timed out as the wake-up reached it) passes the wake-up on to every waiter, at most once per
    wake-up produced (:meth:`pass_on`), so nothing ready is left waiting for a poll's timeout.
    Callers hold the engine lock (the condition's lock).
    """

    __slots__ = ("cond", "generation", "parked", "passed_on")

    def __init__(self, cond: threading.Condition) -> None:
        self.cond = cond
        self.generation = 0  # wake-ups produced on this queue
        self.passed_on = 0  # the newest generation already handed to every waiter
        self.parked = 0  # polls waiting now

    def wait(self, timeout: float) -> None:
        self.parked += 1
        try:
            self.cond.wait(timeout)
        finally:
            self.parked -= 1

    def produced(self) -> None:
        self.generation += 1
        self.cond.notify(1)

    def pass_on(self, seen: int) -> None:
        """A poll that waited since generation ``seen`` takes nothing: hand any wake-up produced
        meanwhile to all the other waiters (once per generation)."""
        if self.generation != seen and self.passed_on < self.generation:
            self.passed_on = self.generation
            self.cond.notify_all()


class RecentKeys:
    """A bounded map of the newest ``limit`` entries (the oldest goes first): a hint, never the truth.

    The engine keeps three: which execution each activity attempt it leased belongs to (a report on
    the attempt finds the row by its primary key), which task each poll leased (a retried poll
    gets it again), and which execution a standalone activity's host run holds (its describe).
    Readers check what they get against the rows (a rolled-back transaction, or an entry since
    replaced, is a miss).
    """

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = _POLL_RECORDS) -> None:
        self._entries: Dict[Any, Any] = {}
        self._limit = limit

    def note(self, key: Any, value: Any) -> None:
        entries = self._entries
        if len(entries) >= self._limit:
            del entries[next(iter(entries))]  # the oldest
        entries[key] = value

    def get(self, key: Any) -> Any:
        return self._entries.get(key)


class _Transaction:
    """What ``with engine.tx():`` enters: the engine lock plus one store transaction.

    A plain context manager rather than a generator one (two or three of them per request: a
    generator, its wrapper and two resumptions each time); it keeps no state of its own (the lock,
    the store and the thread's group-commit flags hold it), so the engine's one instance serves
    every call, nested ones and other threads' included.
    """

    __slots__ = ("_engine", "_lazy")

    def __init__(self, engine: Engine, lazy: bool = False) -> None:
        self._engine = engine
        self._lazy = lazy

    def __enter__(self) -> None:
        engine = self._engine
        engine.lock.acquire()
        try:
            engine.store.begin(self._lazy)
        except BaseException:
            engine.lock.release()
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        engine = self._engine
        store = engine.store
        try:
            if exc_type is not None:
                store.end(False)
                if store.batch_open:  # an error answer may rest on what the open batch holds
                    engine._local.batch = store.batch_id
                return
            local = engine._local
            defer = getattr(local, "defer", False) and engine.on_commit is None
            store.end(True, defer)
            if defer:
                local.batch = store.batch_id
            elif engine.on_commit is not None:
                engine.on_commit()
        finally:
            engine.lock.release()


class _Grouped:
    """What ``with engine.grouped():`` enters (see :meth:`Engine.grouped`); stateless as :class:`_Transaction`."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __enter__(self) -> None:
        engine = self._engine
        local = engine._local
        local.defer, local.batch = engine.config.group_commit, None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        engine = self._engine
        local = engine._local
        local.defer = False
        batch, local.batch = local.batch, None
        store = engine.store
        if batch is None and store.batch_open:  # a read under the lock may have seen the open batch
            batch = store.batch_id
        if batch is not None and store.committed_id < batch:
            with engine.lock:
                if store.batch_open and store.batch_id <= batch:
                    store.flush()


class Engine:
    """Shared state plus the primitives the route handlers and the scheduler build on."""

    def __init__(self, config: Config, db: str, clock: Optional[Clock] = None) -> None:
        self.config = config
        #: The server's one clock (``clock``); ``now()`` is ``time.time`` itself on the real clock.
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.now: Callable[[], float] = self.clock.time
        #: Called after every committed transaction when set (the time-skipping environment's wake-up).
        self.on_commit: Optional[Callable[[], None]] = None
        self.lock = threading.RLock()
        self._tx, self._round = _Transaction(self), _Transaction(self, lazy=True)
        self._grouped = _Grouped(self)
        self.store = Store(db, self.lock)
        #: per request thread: ``defer`` (group commit allowed) and ``batch`` (the batch it wrote in)
        self._local = threading.local()
        self.stopping = False
        #: Task types queued where no registered worker takes them (logged once each).
        self.stranded = StrandedTypes()
        self._conditions: Dict[Tuple[str, str, str], QueueWaiters] = {}
        #: run id -> [condition, readers waiting, of which waiting for a closing event] (:meth:`await_events`)
        self._history_waits: Dict[str, List[Any]] = {}
        self._last_order: Optional[int] = None  # the newest run's created_order, read once from the store
        #: ``(namespace, kind, poll_request_id)`` -> ``(task_id, attempt)`` the poll leased (see :meth:`remember_poll`)
        self._polls = RecentKeys()
        #: activity ``task_id`` -> ``execution_id``, for the attempts leased lately (see :class:`RecentKeys`)
        self.activity_tasks = RecentKeys()
        #: standalone activity host run id -> its one activity's ``execution_id``, for the runs started
        #: lately (a describe reads the row by its key, usually cached text: no ``SELECT`` by run)
        self.host_activities = RecentKeys()
        #: ``(namespace, workflow_id)`` -> the run this engine created last for it (see :meth:`current_run`)
        self._newest_runs = RecentKeys()
        self.namespaces = tuple(n.lower() for n in config.namespaces) or ("default",)
        namespaces.bootstrap(self)  # the table is the truth: created namespaces survive a restart

    # -- locking and transactions ----------------------------------------------------------
    def tx(self) -> _Transaction:
        """One atomic operation (``with engine.tx():``). Inside :meth:`grouped` its commit may join a
        group commit."""
        return self._tx

    def round_tx(self) -> _Transaction:
        """:meth:`tx` for a round that mostly only reads (a long poll's): its ``BEGIN`` waits for its first
        write, so a round that finds nothing executes no transaction statement (``Store.begin``)."""
        return self._round

    def grouped(self) -> _Grouped:
        """Group commit for one request (``with engine.grouped():``): its transactions may leave their
        batch open; on the way out (before the answer is sent) the batch it wrote in, or read from, is
        committed.

        Between a request's last transaction and its answer, requests already waiting for the lock
        run theirs into the same batch, so under load one ``COMMIT`` (the dearest statement: the WAL
        frames of every page written) serves several requests; alone, a request commits at once.
        No answer leaves before what it reports is durable (as durable as each commit was before:
        WAL, ``synchronous=NORMAL``).
        """
        return self._grouped

    def flush(self) -> None:
        """Commit an open group-commit batch now (the scheduler's tick; stopping)."""
        with self.lock:
            self.store.flush()

    def waiters(self, namespace: str, kind: str, queue: str) -> QueueWaiters:
        key = (namespace, kind, queue)
        with self.lock:
            found = self._conditions.get(key)
            if found is None:
                found = QueueWaiters(threading.Condition(self.lock))
                self._conditions[key] = found
            return found

    def notify(self, namespace: str, kind: str, queue: str) -> None:
        """Work became ready on a queue: wake ONE long poll waiting on it (see :class:`QueueWaiters`)."""
        with self.lock:
            found = self._conditions.get((namespace, kind, queue))
            if found is not None:
                found.produced()

    def notify_everyone(self) -> None:
        with self.lock:
            for found in self._conditions.values():
                found.cond.notify_all()
            for entry in self._history_waits.values():
                entry[0].notify_all()

    def await_events(self, run_id: str, timeout: float, closing_only: bool = False) -> None:
        """Wait (holding the engine lock) until an event is appended to ``run_id``'s history, at most
        ``timeout`` seconds: the history route's ``wait_new_event`` long poll. ``closing_only``: woken
        only by an event that closes the run (a read that already holds new events)."""
        with self.lock:
            entry = self._history_waits.get(run_id)
            if entry is None:
                entry = self._history_waits[run_id] = [threading.Condition(self.lock), 0, 0]
            entry[1] += 1
            entry[2] += closing_only
            try:
                entry[0].wait(timeout)
            finally:
                entry[1] -= 1
                entry[2] -= closing_only
                if not entry[1]:
                    del self._history_waits[run_id]

    # -- poll records ---------------------------------------------------------------------
    def remember_poll(self, namespace: str, kind: str, poll_id: str, task_id: str, attempt: Any) -> None:
        """Note the task a poll leased, so a retry of that very poll (same ``poll_request_id``) gets it again.

        Kept in memory, the newest :data:`_POLL_RECORDS` (a poll is retried within seconds), as the real
        server keeps them in its cache rather than its database: writing one row per poll was a fifth
        of the statements of an activity's poll + complete. The replay still checks the lease (same
        worker, same attempt), so a record whose transaction rolled back hands nothing out.
        """
        self._polls.note((namespace, kind, poll_id), (task_id, attempt))

    def polled(self, namespace: str, kind: str, poll_id: str) -> Optional[Tuple[str, Any]]:
        """``(task_id, attempt)`` an earlier poll with this id leased, or ``None``."""
        found: Optional[Tuple[str, Any]] = self._polls.get((namespace, kind, poll_id))
        return found

    # -- runs -------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Optional[Row]:
        return self.store.get("runs", run_id)

    def save_run(self, run: Row) -> None:
        self.store.put("runs", run)

    def current_run(self, namespace: str, workflow_id: str) -> Optional[Row]:
        """The newest run of ``workflow_id`` in ``namespace`` (by ``created_order``), or ``None``.

        A run this engine created lately is read by its key (its text is usually cached: no
        ``SELECT``): every run is created by :meth:`create_run`, which notes it, and it is the newest
        (``created_order`` is this engine's counter; one engine writes the file). A note whose row
        is gone (a rolled-back creation, a deleted run) or was evicted falls back to the index.
        """
        run_id = self._newest_runs.get((namespace, workflow_id))
        if run_id is not None:
            run = self.store.get("runs", run_id)
            if run is not None and run["namespace"] == namespace and run["workflow_id"] == workflow_id:
                return run
        found = self.store.select("runs", "namespace = ? AND workflow_id = ?", (namespace, workflow_id),
                                  order="created_order DESC", limit=1)
        return found[0] if found else None

    def require_run(self, namespace: str, workflow_id: str, run_id: Optional[str] = None) -> Row:
        run = self.get_run(run_id) if run_id else self.current_run(namespace, workflow_id)
        if run is None or run["namespace"] != namespace or run["workflow_id"] != workflow_id:
            foreign = namespaces.foreign_refusal(self, namespace, workflow_id, run_id)
            if foreign is not None:
                raise foreign
            raise ApiError(404, "workflow_not_found", f"workflow {workflow_id} was not found",
                           workflow_id=workflow_id)
        return run

    def runs_of(self, namespace: str, workflow_id: str) -> List[Row]:
        return self.store.select("runs", "namespace = ? AND workflow_id = ?", (namespace, workflow_id),
                                 order="created_order")

    def _next_order(self) -> int:
        """The next run's ``created_order``: a counter (caller holds the lock), not a scan per run.

        A rolled-back creation leaves a gap, which is harmless: the order only sorts runs.
        """
        with self.lock:
            if self._last_order is None:
                self._last_order = self.store.max_value("runs", "created_order")
            self._last_order += 1
            return self._last_order

    def create_run(self, *, namespace: str, workflow_id: str, workflow_type: str, task_queue: str,
                   arguments: Any, kind: str = "workflow", start_accepted: bool = True,
                   parent: Optional[Row] = None, continued_from: Optional[str] = None,
                   memo: Optional[Dict[str, Any]] = None, search_attributes: Optional[Dict[str, Any]] = None,
                   execution_timeout_seconds: Optional[int] = None, run_timeout_seconds: Optional[int] = None,
                   run_number: int = 1, extra: Optional[Dict[str, Any]] = None,
                   run_id: Optional[str] = None, started_extra: Optional[Dict[str, Any]] = None,
                   first_of_id: bool = False) -> Row:
        """Create a run, record its first events and (for workflow runs) queue its first task.

        ``first_of_id``: the caller just found no run of ``workflow_id`` in ``namespace`` (in this
        transaction), so there is no older current run to retire.
        """
        ts = self.now()
        if not first_of_id:
            for older in self.store.select("runs", "namespace = ? AND workflow_id = ? AND is_current = 1",
                                           (namespace, workflow_id)):
                older["is_current"] = 0
                self.save_run(older)
        run: Row = {
            "run_id": run_id or ordered_id("run"), "namespace": namespace, "workflow_id": workflow_id,
            "workflow_type": workflow_type, "task_queue": task_queue, "kind": kind,
            "status": "pending", "is_current": 1, "created_order": self._next_order(),
            "run_number": run_number, "input": arguments, "output": None, "failure": None,
            "memo": dict(memo or {}), "search_attributes": dict(search_attributes or {}),
            "created_at": ts, "closed_at": None, "closed_reason": None, "next_seq": 0,
            "task_id": None, "dirty": False, "open_wait": None, "unapplied_signals": [],
            "parent": parent, "children": [], "continued_from": continued_from, "groups": {}, "members": {},
            "execution_timeout_seconds": execution_timeout_seconds,
            "run_timeout_seconds": run_timeout_seconds, "last_task_failure": None,
        }
        if extra:
            run.update(extra)
        self.store.new_history(run["run_id"])
        run["run_deadline"] = ts + run_timeout_seconds if run_timeout_seconds else None
        if run.get("execution_deadline") is None and execution_timeout_seconds:
            run["execution_deadline"] = ts + execution_timeout_seconds
        if self.config.enforce_workflow_timeouts and kind == "workflow":
            # One timer: the earlier deadline (the run's on a tie, as when each had its row). Either
            # one firing closes the run, so the later one could never fire; a continued run gets its
            # own timer. Two rows cost a start ~3 WAL pages more (the SDK always sends both timeouts).
            deadlines = [(deadline, timeout_kind) for timeout_kind, deadline in (
                ("run_timeout", run["run_deadline"]), ("execution_timeout", run.get("execution_deadline")))
                if deadline is not None]
            if deadlines:
                deadline, timeout_kind = min(deadlines, key=lambda item: item[0])
                self.store.put("timers", {
                    "timer_id": ordered_id("timer"), "namespace": namespace, "run_id": run["run_id"],
                    "state": "pending", "fire_at": deadline, "sequence": None, "delay_seconds": None,
                    "timer_kind": timeout_kind, "parallel": {}})
        if start_accepted:
            self.append(run, "StartAccepted", {
                "workflow_id": workflow_id, "workflow_instance_id": workflow_id, "workflow_run_id": run["run_id"],
                "workflow_type": workflow_type, "task_queue": task_queue})
        started: Dict[str, Any] = {
            "workflow_type": workflow_type, "workflow_id": workflow_id, "workflow_instance_id": workflow_id,
            "workflow_run_id": run["run_id"], "run_id": run["run_id"], "task_queue": task_queue,
            "arguments": arguments, "payload_codec": "avro", "timestamp": iso(ts), "memo": run["memo"],
            "search_attributes": run["search_attributes"], "run_number": run_number,
            "execution_timeout_seconds": execution_timeout_seconds, "run_timeout_seconds": run_timeout_seconds,
            "continued_from_run_id": continued_from,
            "parent_workflow_instance_id": parent.get("workflow_id") if parent else None,
            "parent_workflow_run_id": parent.get("run_id") if parent else None,
            "parent_sequence": parent.get("sequence") if parent else None,
            **(started_extra or {}),
        }
        self.append(run, "WorkflowStarted", started)
        if kind == "workflow":
            self.wake(run)
            run["first_task_id"] = run["task_id"]  # its poll says resume_source_kind "workflow_start"
        self.save_run(run)
        self._newest_runs.note((namespace, workflow_id), run["run_id"])
        return run

    # -- history ----------------------------------------------------------------------------
    def append(self, run: Row, event_type: str, payload: Dict[str, Any]) -> Row:
        seq = self.store.event_count(run["run_id"]) + 1
        event: Row = {"id": f"{run['run_id']}-e{seq}", "sequence": seq, "event_type": event_type,
                      "recorded_at": iso(self.now()), "payload": payload}
        self.store.add_event(run["run_id"], seq, event)
        waiting = self._history_waits.get(run["run_id"])
        if waiting is not None and (waiting[2] < waiting[1] or event_type in CLOSING_EVENTS):
            # a history read waits for this run's next event (wait_new_event), or for its close
            with self.lock:
                waiting[0].notify_all()
        return event

    def history(self, run_id: str, offset: int = 0, limit: Optional[int] = None) -> List[Row]:
        return self.store.events(run_id, offset, limit)

    def history_answer(self, run_id: str, offset: int = 0, limit: Optional[int] = None) -> StoredList:
        """:meth:`history` for an answer: the events' stored text, which the answer's encoder splices in."""
        return StoredList(self.store.event_texts(run_id, offset, limit))

    # -- the wake rule ------------------------------------------------------------------------
    def wake(self, run: Row) -> None:
        """Make sure the run gets a workflow task: now if none is outstanding, else after the lease.

        The caller saves ``run`` afterwards.
        """
        if run["status"] in TERMINAL_STATUSES or run.get("kind") != "workflow":
            return
        task_id = run.get("task_id")
        if task_id:
            task = self.store.get("wf_tasks", task_id)
            if task is not None and task["state"] in ("ready", "delayed"):
                return
            if task is not None and task["state"] == "leased":
                run["dirty"] = True
                return
        ts = self.now()
        task = {"task_id": ordered_id("wft"), "namespace": run["namespace"], "task_queue": run["task_queue"],
                "run_id": run["run_id"], "workflow_type": run["workflow_type"], "state": "ready", "due_at": ts,
                "attempt": 1, "lease_owner": None, "lease_expires_at": None, "poll_request_id": None, "created_at": ts}
        self.store.put("wf_tasks", task)
        run["task_id"] = task["task_id"]
        run["dirty"] = False
        self.notify(run["namespace"], "workflow", run["task_queue"])

    # -- parallel-group barrier -------------------------------------------------------------
    @staticmethod
    def group_root(fields: Dict[str, Any]) -> Optional[str]:
        path = fields.get("parallel_group_path")
        if isinstance(path, list) and path and isinstance(path[0], dict) and path[0].get("parallel_group_id"):
            return str(path[0]["parallel_group_id"])
        gid = fields.get("parallel_group_id")
        return str(gid) if gid else None

    def member_scheduled(self, run: Row, fields: Dict[str, Any], sequence: int) -> None:
        root = self.group_root(fields)
        if root is None:
            return
        run["groups"].setdefault(root, []).append(sequence)
        gid, index = fields.get("parallel_group_id"), fields.get("parallel_group_index")
        run["members"][f"{gid}#{index}"] = sequence

    def member_resolved(self, run: Row, fields: Dict[str, Any], sequence: int) -> None:
        """A step resolved (its terminal event just recorded): wake the run unless a parallel group is
        still partly open; a selection member follows the selection's rules (``selection``)."""
        from .selection import member_closed

        if member_closed(self, run, fields, sequence):
            return
        root = self.group_root(fields)
        if root is not None and root in run["groups"]:
            pending = [s for s in run["groups"][root] if s != sequence]
            if pending:
                run["groups"][root] = pending
                return
            del run["groups"][root]
        self.wake(run)

    @staticmethod
    def parallel_fields(source: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in source.items()
                if k.startswith("parallel_group_") or k.startswith("selection_member_")}

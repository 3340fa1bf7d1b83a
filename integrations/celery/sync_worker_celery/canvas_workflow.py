"""The canvas workflow: one durable run per chain / group / chord (or deferred task).

The client compiles the canvas into a plain-data *plan* (:func:`compile_plan`) — every
task's name, wire arguments, queue, retry policy and timeouts are fixed at publish time, so
the workflow is deterministic without knowing the tasks — and starts the workflow type
``sync_worker_celery.canvas`` with it. Every worker built by the facade registers it.

Plan nodes::

    {"kind": "task",  "name", "args", "kwargs", "id", "queue", "immutable", "countdown", "eta",
                      "options": {retry_policy, start_to_close, heartbeat_timeout, schedule_to_start},
                      "meta": {...}, "link": [node], "link_error": [node]}
    {"kind": "chain", "tasks": [node, ...]}
    {"kind": "group", "id", "tasks": [node, ...]}     # members in parallel; result: the list
    {"kind": "chord", "id", "header": group-node, "body": node}

Groups run their plain-task members as one parallel group of activities, and any nested
chain/group/chord member as a child canvas run, all in parallel. A member failure fails the
run with that task's own error type (``AsyncResult.get()`` re-raises it).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Optional

from sync_worker import workflow
from sync_worker.errors import ActivityFailed, ChildWorkflowFailed

from . import errbacks, signals
from .canvas_stream import HEADER_END_SIGNAL, HEADER_SIGNAL
from .publish import activity_options, announce_canvas, resolve_queue
from .replace import plan_of
from .stamping import linked_signatures, split_options, with_signature
from .wire import encode_call

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery
    from .canvas import Signature

__all__ = ["CANVAS_WORKFLOW", "CanvasWorkflow", "compile_plan", "start_canvas"]

CANVAS_WORKFLOW = "sync_worker_celery.canvas"
#: Member-id prefix of a plan compiled before its run exists (beat schedules): the run's id goes there.
ROOT_PLACEHOLDER = "{root}"
MEMBERS_QUERY = "celery.members"
#: Memo key of a run that is one task with its countdown/eta/callbacks (``AsyncResult`` reads the task).
ONE_TASK_MEMO = "celery_one_task"


def compile_plan(app: Celery, sig: Signature, root_id: str, counter: Optional[List[int]] = None,
                 parent_queue: Optional[str] = None) -> Dict[str, Any]:
    """The plain-data plan of ``sig``; member ids are ``<root_id>~<n>`` unless set."""
    from .canvas import Signature as Sig
    from .canvas import maybe_signature

    counter = counter if counter is not None else [0]

    def next_id() -> str:
        counter[0] += 1
        return f"{root_id}~{counter[0]}"

    kind = sig.subtask_type
    if kind in ("chain", "group", "chord"):
        if kind == "chain":
            # a one-task group in a chain is that task (Celery's maybe_unroll_group, issue #1656)
            members = [m.tasks[0] if m.subtask_type == "group" and len(m.tasks) == 1 else m
                       for m in sig.tasks]  # type: ignore[attr-defined]
            timing = {k: sig.options[k] for k in ("countdown", "eta") if sig.options.get(k) is not None}
            if timing and members:  # a chain's countdown/eta delays its first task, as in Celery
                members = [members[0].clone(**timing), *members[1:]]
            plan: Dict[str, Any] = {"kind": "chain", "tasks": [compile_plan(app, t, root_id, counter, parent_queue)
                                                                for t in members]}
        elif kind == "group":
            plan = {"kind": "group", "id": sig.id or next_id(),
                    "tasks": [compile_plan(app, t, root_id, counter, parent_queue)
                              for t in sig.tasks]}  # type: ignore[attr-defined]
        else:
            header = compile_plan(app, sig.header, root_id, counter, parent_queue)  # type: ignore[attr-defined]
            body = compile_plan(app, sig.body, root_id, counter, parent_queue)  # type: ignore[attr-defined]
            plan = {"kind": "chord", "id": sig.id or next_id(), "header": header, "body": body}
        on_header = bool(app.conf.get("task_allow_error_cb_on_chord_header"))
        for key in ("link", "link_error"):
            for callback in _links(sig.options.get(key)):
                callback = maybe_signature(callback, app=app)
                compiled = with_signature(compile_plan(app, callback, root_id, counter), callback)
                attach_callback(plan, key, errbacks.mark(app, compiled) if key == "link_error" else compiled,
                                on_header)
        return plan
    task = app.tasks.get(sig.name)
    options, stamps = split_options(dict(sig.options))
    if stamps:  # a stamped task: its stamps travel as headers, as in a Celery message
        options["headers"] = {**dict(options.get("headers") or {}), **stamps}
    queue = resolve_queue(app, sig.name, sig.args, sig.kwargs, options, task)
    eta = options.get("eta")
    node: Dict[str, Any] = {
        "kind": "task", "name": sig.name, "args": list(sig.args), "kwargs": dict(sig.kwargs),
        "id": options.get("task_id") or next_id(), "queue": queue, "immutable": sig.immutable,
        "countdown": options.get("countdown"),
        "eta": eta.astimezone(timezone.utc).isoformat() if isinstance(eta, datetime) else eta,
        "options": activity_options(app, task, options),
        "meta": {k: options[k] for k in ("time_limit", "soft_time_limit", "headers", "argsrepr", "kwargsrepr",
                                         "replaced_task_nesting") if options.get(k)},
        "link": [with_signature(compile_plan(app, s, root_id, counter), s)
                 for s in (maybe_signature(c, app=app) for c in _links(options.get("link")))],
        "link_error": [errbacks.mark(app, with_signature(compile_plan(app, s, root_id, counter), s))
                       for s in (maybe_signature(c, app=app) for c in _links(options.get("link_error")))],
    }
    assert isinstance(sig, Sig)
    return node


def _links(value: Any) -> List[Any]:
    """``options["link"]``/``["link_error"]``: a list, or one signature (Celery accepts both)."""
    if not value:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _immutable(plan: Dict[str, Any]) -> Dict[str, Any]:
    """``plan`` as an immutable callback: its first task(s) ignore the parent's result."""
    kind = plan["kind"]
    if kind == "task":
        return dict(plan, immutable=True)
    if kind == "chain":
        tasks = list(plan["tasks"])
        return dict(plan, tasks=[_immutable(tasks[0]), *tasks[1:]] if tasks else [])
    if kind == "group":
        return dict(plan, tasks=[_immutable(t) for t in plan["tasks"]])
    return dict(plan, header=_immutable(plan["header"]))


def attach_callback(plan: Dict[str, Any], key: str, callback: Dict[str, Any], on_header: bool = False) -> None:
    """Attach a ``link`` / ``link_error`` callback given to a chain, group or chord to the tasks Celery
    attaches it to, so it runs durably with them (never dropped): a chain's link to its last task and its
    errback to every task; a group's link (immutable) to its first task and its errback (immutable) to
    every member; a chord's link and errback to its body (the errback to the header's members too with
    ``task_allow_error_cb_on_chord_header``). Celery's canvas.py does the same at apply time."""
    kind = plan["kind"]
    if kind == "task":
        plan.setdefault(key, []).append(callback)
    elif kind == "chain":
        tasks = plan["tasks"]
        for target in (tasks if key == "link_error" else tasks[-1:]):
            attach_callback(target, key, callback, on_header)
    elif kind == "group":
        for target in (plan["tasks"] if key == "link_error" else plan["tasks"][:1]):
            attach_callback(target, key, _immutable(callback), on_header)
    else:
        attach_callback(plan["body"], key, callback, on_header)
        if key == "link_error" and on_header:
            for target in plan["header"]["tasks"]:
                attach_callback(target, key, _immutable(callback), on_header)


def start_canvas(app: Celery, sig: Signature, root_id: str, queue: str) -> Any:
    from .result import AsyncResult, GroupResult

    plan = compile_plan(app, sig, root_id)
    if plan["kind"] == "chain" and _first_task(plan).get("id"):
        plan["celery_root"] = _first_task(plan)["id"]  # a chain's root_id is its first task's, as in Celery
    # a one-task run (countdown/eta/link): its task's outcome is readable before its callbacks finish
    memo = {ONE_TASK_MEMO: True} if plan["kind"] == "task" else None
    announce = plan["kind"] != "task"  # a one-task run comes from send_task, which sends the signals itself
    if announce:
        announce_canvas(app, plan, signals.before_task_publish)
    app.client.start_workflow(CANVAS_WORKFLOW, plan, root_id, task_queue=queue, workflow_id=root_id, memo=memo)
    if announce:
        announce_canvas(app, plan, signals.after_task_publish)
    if plan["kind"] == "group":
        members = [AsyncResult(m.get("id") or f"{root_id}~?", app=app) for m in plan["tasks"]]
        return GroupResult(root_id, members, app=app)
    result = AsyncResult(root_id, app=app)
    if plan["kind"] == "chain":
        from .result_graph import link_parents

        link_parents(app, result, plan)
    return result


def _last_task_id(node: Dict[str, Any]) -> Optional[str]:
    """The id of the task that runs last in ``node`` (for a group: its last member's)."""
    kind = node["kind"]
    if kind == "task":
        return str(node["id"]) if node.get("id") else None
    if kind == "chord":
        return _last_task_id(node["body"])
    tasks = node.get("tasks") or []
    return _last_task_id(tasks[-1]) if tasks else None


def _ends_in_group(node: Dict[str, Any]) -> bool:
    """A group member unrolled into its group: a group (not a chain ending in one, as in Celery)."""
    return bool(node["kind"] == "group")


def _first_task(node: Dict[str, Any]) -> Dict[str, Any]:
    """The task node that runs first in ``node`` (where Celery's callbacks on it sit)."""
    kind = node["kind"]
    if kind == "task":
        return node
    if kind == "chord":
        return _first_task(node["header"])
    tasks = node.get("tasks") or []
    return _first_task(tasks[0]) if tasks else {}


def _first_queue(node: Dict[str, Any]) -> Optional[str]:
    kind = node["kind"]
    if kind == "task":
        return str(node["queue"])
    if kind == "chord":
        return _first_queue(node["header"])
    tasks = node.get("tasks") or []
    return _first_queue(tasks[0]) if tasks else None


def _member_failure(error: ChildWorkflowFailed) -> ActivityFailed:
    """A nested canvas's failure as the failed task's own error, so the run (and ``.get()``) reports the
    task's exception type, not the child-run wrapper. The child run recorded the task's class."""
    exception_class = error.exception_class or ""
    exception_type = exception_class.rpartition(".")[2] or None
    return ActivityFailed(str(error), exception_type=exception_type, exception_class=exception_class or None)


@workflow.defn(name=CANVAS_WORKFLOW)
class CanvasWorkflow:
    """Runs a compiled canvas plan; the run's result is the canvas's result."""

    def __init__(self) -> None:
        self.members: Dict[str, Dict[str, Any]] = {}
        self.streamed: List[Dict[str, Any]] = []  # a generator header's members, as they arrive (canvas_stream)
        self.stream_closed = False
        self.celery_root: Optional[str] = None  # the tasks' request.root_id (the first task's id, as in Celery)

    @workflow.query(MEMBERS_QUERY)
    def member_states(self) -> Dict[str, Dict[str, Any]]:
        return self.members

    @workflow.signal(HEADER_SIGNAL)
    def header_member(self, member: Dict[str, Any]) -> None:
        self.streamed.append(member)

    @workflow.signal(HEADER_END_SIGNAL)
    def header_end(self, count: Any = None) -> None:
        self.stream_closed = True

    def run(self, ctx: Any, plan: Dict[str, Any], root_id: Optional[str] = None) -> Generator[Any, Any, Any]:
        root = root_id or ctx.workflow_id
        self.celery_root = plan.get("celery_root") or root
        seed = plan.get("seed")
        if isinstance(seed, dict):  # a group member run as a child: it starts from the group's input
            return (yield from self._node(ctx, plan, root, seed.get("value"), True))
        return (yield from self._node(ctx, plan, root, None, False))

    # -- nodes ---------------------------------------------------------------------------------------

    def _activity(self, ctx: Any, node: Dict[str, Any], root: str, parent: Any, has_parent: bool,
                  parent_id: Optional[str]) -> Any:
        if str(node["id"]).startswith(ROOT_PLACEHOLDER):  # a scheduled plan: ids belong to this run
            node["id"] = root + str(node["id"])[len(ROOT_PLACEHOLDER):]
        args = list(node["args"])
        if has_parent and not node.get("immutable"):
            args = [parent, *args]
        meta = dict(node.get("meta") or {}, id=node["id"], root_id=self.celery_root or root, parent_id=parent_id,
                    **linked_signatures(node))
        opts = node["options"]
        self.members[node["id"]] = {"state": "STARTED", "name": node["name"]}
        return ctx.schedule_activity(
            node["name"], encode_call(args, node["kwargs"], meta), queue=node["queue"],
            retry_policy=opts["retry_policy"], start_to_close_timeout=opts["start_to_close"],
            heartbeat_timeout=opts.get("heartbeat_timeout"), schedule_to_start_timeout=opts.get("schedule_to_start"))

    def _delay(self, ctx: Any, node: Dict[str, Any]) -> Optional[int]:
        if node.get("countdown") is not None:
            return max(0, math.ceil(float(node["countdown"])))
        if node.get("eta"):
            eta = datetime.fromisoformat(str(node["eta"]))
            eta = eta if eta.tzinfo else eta.replace(tzinfo=timezone.utc)
            now = ctx.now()
            now = now if now.tzinfo else now.replace(tzinfo=timezone.utc)
            left: float = (eta - now).total_seconds()
            return max(0, math.ceil(left))
        return None

    def _task(self, ctx: Any, node: Dict[str, Any], root: str, parent: Any, has_parent: bool,
              parent_id: Optional[str]) -> Generator[Any, Any, Any]:
        delay = self._delay(ctx, node)
        if delay:
            yield ctx.sleep(delay)
        try:
            result = yield self._activity(ctx, node, root, parent, has_parent, parent_id)
            result = yield from self._resolve(ctx, node, root, result)
        except Exception as error:
            self.members[node["id"]] = {"state": "FAILURE", "name": node["name"], "error": str(error),
                                        "type": getattr(error, "exception_type", None),
                                        "class": getattr(error, "exception_class", None)}
            yield from self._errbacks(ctx, node.get("link_error") or [], root, node, error)
            raise
        self.members[node["id"]] = {"state": "SUCCESS", "name": node["name"], "result": result}
        for callback in node.get("link") or []:
            try:  # a callback is a task of its own (Celery: a separate message): its failure is its own
                yield from self._node(ctx, callback, root, result, True, node["id"])
            except Exception:
                ctx.logger.warning("link callback of %s failed", node["id"])
        return result

    def _resolve(self, ctx: Any, node: Dict[str, Any], root: str, result: Any) -> Generator[Any, Any, Any]:
        """A member replaced itself (``Task.replace``): run the replacement here; its result is the member's."""
        plan = plan_of(result)
        while plan is not None:
            result = yield from self._node(ctx, plan, root, None, False, node.get("id"))
            plan = plan_of(result)
        return result

    def _errbacks(self, ctx: Any, callbacks: List[Dict[str, Any]], root: str, failed: Dict[str, Any],
                  error: BaseException) -> Generator[Any, Any, None]:
        """A failed task's errbacks: ``errback(task_id)``, or ``errback(request, exc, traceback)`` for a
        new-style one (:mod:`sync_worker_celery.errbacks`). An errback's own failure is logged."""
        failed_id = str(failed["id"])
        for errback in callbacks:
            try:
                if errback.get(errbacks.FLAG) and not errback.get("immutable"):  # immutable: no arguments added
                    call = errbacks.new_style_call(errback, failed, failed_id, error)
                    yield from self._node(ctx, call, root, None, False, failed_id)
                else:
                    yield from self._node(ctx, errback, root, failed_id, True, failed_id)
            except Exception:
                ctx.logger.warning("errback of %s failed", failed_id)

    def _node(self, ctx: Any, node: Dict[str, Any], root: str, parent: Any, has_parent: bool,
              parent_id: Optional[str] = None) -> Generator[Any, Any, Any]:
        kind = node["kind"]
        if kind == "task":
            return (yield from self._task(ctx, node, root, parent, has_parent, parent_id))
        if kind == "chain":
            value, chained, last_id = parent, has_parent, parent_id
            for member in node["tasks"]:
                value = yield from self._node(ctx, member, root, value, chained, last_id)
                chained, last_id = True, _last_task_id(member) or member.get("id", last_id)
            return value
        if kind == "group":
            return (yield from self._group(ctx, node, root, parent, has_parent, parent_id))
        if kind == "chord":
            try:
                results = yield from self._group(ctx, node["header"], root, parent, has_parent, parent_id)
            except Exception as error:
                # the body will not run: its errbacks run now, with its id (Celery's chord_error_from_stack)
                body = _first_task(node["body"])
                yield from self._errbacks(ctx, body.get("link_error") or [], root, dict(body, id=body.get("id")
                                                                                       or node["id"]), error)
                raise
            # the body's parent is a header task (Celery: the one that completed the chord; here the last)
            return (yield from self._node(ctx, node["body"], root, results, True,
                                          _last_task_id(node["header"]) or node["id"]))
        raise ValueError(f"unknown canvas node kind {kind!r}")

    def _streamed_group(self, ctx: Any, node: Dict[str, Any], root: str, parent: Any, has_parent: bool,
                        parent_id: Optional[str]) -> Generator[Any, Any, Any]:
        """A generator header (canvas_stream): the members that have arrived run as one batch while
        the next ones arrive; done when the header is closed and every member has finished."""
        results: List[Any] = []
        taken = 0
        while True:
            yield ctx.wait_condition(lambda seen=taken: len(self.streamed) > seen or self.stream_closed,
                                     key=f"celery.header.{taken}")
            batch = self.streamed[taken:]
            if not batch and self.stream_closed:
                return results
            taken += len(batch)
            out = yield from self._group(ctx, dict(node, tasks=batch, streamed=False), root, parent, has_parent,
                                         parent_id)
            results.extend(out)

    def _group(self, ctx: Any, node: Dict[str, Any], root: str, parent: Any, has_parent: bool,
               parent_id: Optional[str]) -> Generator[Any, Any, Any]:
        if node.get("streamed"):
            return (yield from self._streamed_group(ctx, node, root, parent, has_parent, parent_id))
        members = node["tasks"]
        if not members:
            return []
        simple = all(m["kind"] == "task" and not m.get("link") and not m.get("link_error")
                     and self._delay(ctx, m) is None for m in members)
        commands: List[Any] = []
        for member in members:
            if simple:
                commands.append(self._activity(ctx, member, root, parent, has_parent, parent_id))
            else:
                child: Dict[str, Any] = {"kind": "chain", "tasks": [member]}
                if self.celery_root and self.celery_root != root:
                    child["celery_root"] = self.celery_root
                if has_parent:
                    child["seed"] = {"value": parent}
                commands.append(ctx.start_child_workflow(
                    CANVAS_WORKFLOW, [child, root], task_queue=_first_queue(member)))
        try:
            results = yield commands
        except ChildWorkflowFailed as error:
            for member in members:
                self.members.setdefault(member.get("id", "?"), {"state": "FAILURE"})
            raise _member_failure(error) from None
        except Exception:
            for member in members:
                self.members.setdefault(member.get("id", "?"), {"state": "FAILURE"})
            raise
        results = list(results)
        replaced = [i for i, result in enumerate(results) if plan_of(result) is not None]
        if replaced:  # members that replaced themselves: their replacements run side by side
            children = [ctx.start_child_workflow(CANVAS_WORKFLOW, [plan_of(results[i]), root],
                                                 task_queue=_first_queue(members[i])) for i in replaced]
            try:
                outputs = yield children
            except ChildWorkflowFailed as error:
                raise _member_failure(error) from None
            for i, output in zip(replaced, outputs):
                results[i] = output
        for member, result in zip(members, results):
            if member.get("id") and member["kind"] == "task":
                self.members[member["id"]] = {"state": "SUCCESS", "name": member.get("name"), "result": result}
        # a member that is a group (or a chain ending in one) is unrolled into this group, as Celery
        # unrolls nested groups: its results take its place, side by side with the others
        flat: List[Any] = []
        for member, result in zip(members, results):
            if _ends_in_group(member) and isinstance(result, list):
                flat.extend(result)
            else:
                flat.append(result)
        return flat

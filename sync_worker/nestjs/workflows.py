"""Python-authored nestjs-durable workflows, coordinator-driven: :class:`WorkflowWorker`.

The NestJS engine stays the sole owner of the run -- its state, recovery and timers. Registered with
``engine.remote("pipeline", {group: "py-workflows"})``, a run advances one *turn* at a time: the
engine sends the run's history (a ``workflow`` job on ``<P>-tasks-<group>``), a worker replays the
function from the top (:class:`~sync_worker.nestjs.workflow_context.WorkflowContext`) and answers
with a *decision* (a ``decision`` job on ``<P>-decisions``)::

    task     {taskId, runId, workflow, workflowVersion, input, history[], pendingSignals?, group,
              priority?, attempt}
    decision {taskId, runId, status: continue | completed | failed | cancelled, commands[],
              output?, error?}

:meth:`WorkflowWorker.process_task` is that turn as a pure function (no broker, no clock but
``ctx.now``); :meth:`WorkflowWorker.run` serves it over Redis on the runtime shell, and
``sync-worker nestjs`` serves workflows and steps from one process. See docs/nestjs.md.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, TypeVar

from ..errors import InvalidWorkflowDefinition
from .bounds import bound_error
from .descriptor import routing_token
from .workflow_context import (
    NON_DETERMINISM,
    NondeterminismError,
    StepFailed,
    WorkflowCancelled,
    WorkflowContext,
    _Suspended,
    error_dict,
)

__all__ = ["WorkflowWorker", "is_workflow_task"]

logger = logging.getLogger("sync_worker.nestjs.workflows")

F = TypeVar("F", bound=Callable[..., Any])


def is_workflow_task(task: Any) -> bool:
    """A workflow turn (a string ``workflow`` and a ``history`` list), as the engine's runners tell it."""
    return isinstance(task, Mapping) and isinstance(task.get("workflow"), str) and isinstance(task.get("history"), list)


class WorkflowWorker:
    """Workflow functions by name, served on one worker ``group`` (``engine.remote(name, {group})``).

    ::

        workflows = WorkflowWorker(group="py-workflows")

        @workflows.workflow("pipeline")
        def pipeline(ctx, base_id):
            started_at = ctx.now()
            rows = ctx.step("ingestion", {"key": f"/{base_id}/data.csv"})
            ctx.sleep(60_000)
            return {"rows": rows, "startedAt": started_at}

        workflows.run(redis="redis://127.0.0.1:6379/0")

    ``partition`` is the default partition of the steps the workflows call (``ctx.step(...,
    group=...)`` overrides it per call); ``namespace`` folds into the Redis key prefix as the
    engine's ``BullMQTransport({namespace})`` does.
    """

    def __init__(self, group: str = "workflows", *, partition: Optional[str] = None,
                 namespace: Optional[str] = None) -> None:
        if not isinstance(group, str) or not group.strip():
            raise InvalidWorkflowDefinition("a WorkflowWorker needs a non-empty group name")
        self.group = group
        self.partition = partition if partition and partition != "default" else None
        self.namespace = namespace if namespace and namespace != "default" else None
        self._workflows: Dict[str, Callable[..., Any]] = {}
        self._wants_input: Dict[str, bool] = {}
        self._versions: Dict[str, str] = {}

    # -- registration --------------------------------------------------------------------------

    def workflow(self, name: str, *, version: Optional[str] = None) -> Callable[[F], F]:
        """Register the decorated ``fn(ctx, input)`` (or ``fn(ctx)``) as the workflow ``name``.

        ``version`` is announced in the worker descriptor only; replay never reads it.
        """

        def register(fn: F) -> F:
            self.register(name, fn, version=version)
            return fn

        return register

    def register(self, name: str, fn: Callable[..., Any], *, version: Optional[str] = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidWorkflowDefinition("a nestjs workflow needs a non-empty string name")
        if not callable(fn):
            raise InvalidWorkflowDefinition(f"workflow {name!r}: {fn!r} is not callable")
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            raise InvalidWorkflowDefinition(
                f"workflow {name!r}: {getattr(fn, '__qualname__', fn)!r} must be a plain function: "
                "ctx operations block until their outcome is recorded (no async def, no yield)")
        if name in self._workflows and self._workflows[name] is not fn:
            raise InvalidWorkflowDefinition(f"workflow {name!r} is already registered")
        self._workflows[name] = fn
        self._wants_input[name] = _wants_input(fn)
        if version is not None:
            self._versions[name] = str(version)

    @property
    def names(self) -> List[str]:
        """The registered workflow names, sorted."""
        return sorted(self._workflows)

    def handles(self, name: str) -> bool:
        return name in self._workflows

    @property
    def token(self) -> str:
        """The routing token of the group queue (``<P>-tasks-<token>``)."""
        return routing_token(self.group)

    def registrations(self) -> List[Dict[str, Any]]:
        """What the worker descriptor announces per workflow: ``{name, version?, group}``."""
        out: List[Dict[str, Any]] = []
        for name in self.names:
            entry: Dict[str, Any] = {"name": name}
            if name in self._versions:
                entry["version"] = self._versions[name]
            entry["group"] = self.token
            out.append(entry)
        return out

    # -- the pure core -------------------------------------------------------------------------

    def process_task(self, task: Mapping[str, Any], *,
                     is_cancelled: Optional[Callable[[str], bool]] = None) -> Dict[str, Any]:
        """Replay one turn of ``task`` and return the wire decision. Never raises for bad input."""
        base: Dict[str, Any] = {"taskId": task.get("taskId"), "runId": task.get("runId")}
        name = task.get("workflow")
        fn = self._workflows.get(name) if isinstance(name, str) else None
        if fn is None:
            return {**base, "status": "failed", "commands": [],
                    "error": {"message": f"no workflow registered for {name!r}", "code": "no_workflow"}}
        ctx = WorkflowContext(task, partition=self.partition, is_cancelled=is_cancelled)
        decision: Dict[str, Any]
        try:
            args = (ctx, task.get("input")) if self._wants_input[str(name)] else (ctx,)
            output = fn(*args)
            decision = {**base, "status": "completed", "commands": ctx.commands, "output": output}
        except _Suspended:
            decision = {**base, "status": "continue", "commands": ctx.commands}
        except WorkflowCancelled:
            return {**base, "status": "cancelled", "commands": ctx.commands}
        except StepFailed as error:
            decision = {**base, "status": "failed", "commands": ctx.commands, "error": bound_error(error.error)}
        except Exception as error:  # the workflow's own failure fails the run; never the worker
            decision = {**base, "status": "failed", "commands": ctx.commands, "error": error_dict(error)}
        broken = ctx.nondeterminism
        if broken is None and ctx.unconsumed_history():
            extra = ", ".join(str(seq) for seq in ctx.unconsumed_history())
            broken = NondeterminismError(
                f"workflow {name}, run {ctx.run_id}: the history records operations at seq {extra} that this "
                f"code never reached (it stopped at seq {ctx.seq}) -- the workflow changed under a run in flight")
        if broken is not None:
            logger.error("%s", broken)
            broken_error = error_dict(broken)
            broken_error["code"] = NON_DETERMINISM
            decision = {**base, "status": "failed", "commands": [], "error": broken_error}
        return decision

    # -- serving -------------------------------------------------------------------------------

    def run(self, *, redis: str = "redis://127.0.0.1:6379/0", prefix: str = "durable", steps: Any = None,
            concurrency: Any = 4, workflow_slots: int = 4, pool: Optional[str] = None,
            shutdown_timeout: float = 30.0, lock_duration: float = 30.0) -> int:
        """Serve these workflows (and ``steps``, a :class:`~sync_worker.nestjs.StepWorker`, when
        given) over Redis until SIGTERM/SIGINT, then stop warm; returns the exit code (0 = clean).

        Owns its Redis connections. Signals are handled when called from the main thread (a second
        SIGTERM stops cold); from another thread it simply runs until the process stops it.
        """
        from ..host import serve
        from .redis_transport import RedisTransport
        from .runtime import NestjsWorker

        transport = RedisTransport(redis, prefix=prefix, namespace=self.namespace, partition=self.partition,
                                   lock_duration=lock_duration)
        worker = NestjsWorker(steps, transport, workflows=self, concurrency=concurrency,
                              workflow_slots=workflow_slots, pool=pool, shutdown_timeout=shutdown_timeout)
        if threading.current_thread() is threading.main_thread():
            return serve(worker, log=logger)
        worker.run()
        return 0


def _wants_input(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes a second positional argument (the run input)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                    inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2

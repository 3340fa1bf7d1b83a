"""``sync-worker nestjs MODULE:ATTR... --transport URL``: serve steps and workflows until signalled.

Each target is a :class:`StepWorker` or a :class:`WorkflowWorker` (or a function making one); one
of each may be given, and both are served from one process on one runtime.

``-P prefork -c N`` serves the steps in N processes (one step at a time each) and the workflows
in one more, under a supervising parent (:mod:`sync_worker.host.prefork`, docs/pools.md); each
child opens its own transport connections after the fork.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from typing import Any, Dict, Optional, Tuple

import click

from ..cli.params import (
    PREFORK,
    ConcurrencyParam,
    autoscale_bounds,
    configure_logging,
    import_target,
    loglevel_option,
    resolve_pool,
)
from ..host import serve
from ..host.exits import EXIT_USAGE
from ..runtime.backend import POOL_ENV
from .runtime import NestjsWorker
from .steps import StepWorker
from .workflows import WorkflowWorker

__all__ = ["nestjs_command"]

logger = logging.getLogger("sync_worker.nestjs.cli")


def load_target(target: str) -> Any:
    """The StepWorker or WorkflowWorker named by ``module:attr`` (an instance, or a factory)."""
    obj: Any = import_target(target)
    if inspect.isfunction(obj) or inspect.ismethod(obj):  # a factory
        obj = obj()
    if not isinstance(obj, (StepWorker, WorkflowWorker)):
        raise click.UsageError(f"{target} is {obj!r}, not a sync_worker.nestjs.StepWorker or WorkflowWorker "
                               "(or a function making one)")
    return obj


def load_step_worker(target: str) -> StepWorker:
    """The StepWorker named by ``module:attr`` (an instance, or a factory that returns one)."""
    obj = load_target(target)
    if not isinstance(obj, StepWorker):
        raise click.UsageError(f"{target} is {obj!r}, not a sync_worker.nestjs.StepWorker (or a function making one)")
    return obj


def load_targets(targets: Tuple[str, ...]) -> Tuple[Optional[StepWorker], Optional[WorkflowWorker]]:
    steps: Optional[StepWorker] = None
    workflows: Optional[WorkflowWorker] = None
    for target in targets:
        obj = load_target(target)
        if isinstance(obj, StepWorker):
            if steps is not None:
                raise click.UsageError("give at most one StepWorker target")
            steps = obj
        else:
            if workflows is not None:
                raise click.UsageError("give at most one WorkflowWorker target")
            workflows = obj
    return steps, workflows


@click.command("nestjs")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("--transport", "transport_url", envvar="SYNC_WORKER_NESTJS_TRANSPORT", required=True,
              help="redis://HOST:PORT[/DB] (BullMQ; steps and workflows), postgresql://... or "
                   "mysql://USER:PASS@HOST:PORT/DB (the engine's DbTransport tables) "
                   "or sqs://[REGION][?endpoint=URL] (SqsTransport).")
@click.option("--prefix", default="durable", show_default=True,
              help="The engine's key prefix (BullMQTransport/DbTransport `prefix`).")
@click.option("--namespace", default=None, help="BullMQ deployment namespace (folded into the prefix).")
@click.option("--partition", default=None, help="Serve the `<step>@<partition>` queues (BullMQ).")
@click.option("-c", "--concurrency", type=ConcurrencyParam(), default=4, show_default=True,
              help="Step slots: a fixed N, or 'adaptive' (memory admission gate and adaptive limit).")
@click.option("--workflow-slots", type=click.IntRange(min=1), default=4, show_default=True,
              help="Workflow turns replayed at once (a WorkflowWorker target; never behind the memory gate).")
@click.option("--autoscale", default=None, metavar="MAX,MIN",
              help="Adaptive step slots between MIN (default 1) and MAX.")
@click.option("-P", "--pool", default=None,
              help="threads (default), gevent (patched first) or prefork (-c processes, one step each).")
@click.option("--lock-duration", type=float, default=None,
              help="Lease seconds: BullMQ lock duration (30), SQL claim lease (30), SQS visibility (60).")
@click.option("--stalled-interval", type=float, default=None, help="BullMQ stalled-check period, seconds (30).")
@click.option("--shutdown-timeout", type=float, default=30.0, show_default=True,
              help="Seconds a warm stop waits for running steps.")
@loglevel_option()
def nestjs_command(targets: Tuple[str, ...], transport_url: str, prefix: str, namespace: Optional[str],
                   partition: Optional[str], concurrency: Any, workflow_slots: int, autoscale: Optional[str],
                   pool: Optional[str],
                   lock_duration: Optional[float], stalled_interval: Optional[float],
                   shutdown_timeout: float, loglevel: str) -> None:
    """Serve the nestjs-durable steps and workflows of TARGET... until signalled.

    Each TARGET is MODULE:ATTR naming a StepWorker or a WorkflowWorker (workflows: Redis only).
    """
    pool = resolve_pool(pool, allow_prefork=True)
    prefork = pool == PREFORK
    if prefork and (autoscale is not None or not isinstance(concurrency, int)):
        raise click.UsageError("-P prefork takes a number of processes (-c N), not adaptive slots")
    configure_logging(loglevel)
    options: Dict[str, Any] = {}
    if lock_duration is not None:
        options["lock_duration"] = lock_duration
    if stalled_interval is not None:
        if not transport_url.startswith(("redis", "unix")):
            raise click.UsageError("--stalled-interval applies to the redis transport only")
        options["stalled_interval"] = stalled_interval
    from .urls import transport_for_url

    try:
        transport = transport_for_url(transport_url, prefix=prefix, namespace=namespace, partition=partition,
                                      **options)
    except ValueError as error:
        raise click.UsageError(str(error))
    os.environ[POOL_ENV] = "threads" if prefork else pool
    bounds = autoscale_bounds(autoscale)
    if bounds is not None:
        concurrency = bounds
    steps, workflows = load_targets(targets)
    try:
        # under prefork this one only checks the targets and the transport: it never runs (no
        # connection is opened before the fork)
        worker = NestjsWorker(steps, transport, workflows=workflows, concurrency=1 if prefork else concurrency,
                              pool="threads" if prefork else pool, workflow_slots=workflow_slots,
                              shutdown_timeout=shutdown_timeout)
    except ValueError as error:
        click.echo(f"sync-worker nestjs: {error}", err=True)
        sys.exit(EXIT_USAGE)
    if prefork:
        sys.exit(_serve_prefork(worker, int(concurrency), lambda: transport_for_url(
            transport_url, prefix=prefix, namespace=namespace, partition=partition, **options)))
    sys.exit(serve(worker, log=logger))


def _serve_prefork(template: NestjsWorker, processes: int, new_transport: Any) -> int:
    """Serve the steps on ``processes`` children and the workflows on one more; each child builds its
    own transport and NestjsWorker (its instance id carries its pid)."""
    from ..host.prefork import ACTIVITIES, ChildSpec, PreforkPool, Recycler

    def make_runtime(spec: ChildSpec, recycler: Recycler) -> NestjsWorker:
        steps_child = spec.role == ACTIVITIES
        return NestjsWorker(template.steps if steps_child else None, new_transport(),
                            workflows=None if steps_child else template.workflows, concurrency=1,
                            workflow_slots=template.workflow_slots, pool="threads",
                            shutdown_timeout=template.shutdown_timeout)

    logger.info("sync-worker nestjs: prefork pool of %d step process(es)%s over %s", processes,
                " and 1 workflow process" if template.workflows is not None else "", template.transport.kind)
    pool = PreforkPool(make_runtime, processes=processes, workflows=template.workflows is not None,
                       activities=template.steps is not None, shutdown_timeout=template.shutdown_timeout, log=logger)
    return pool.serve()

"""``sync-worker run MODULE:ATTR``: run a worker in the foreground with signal-driven shutdown.

Signals only set flags; the foreground (:func:`sync_worker.host.serve`, shared by every worker
command) acts on them:

* first SIGTERM or SIGINT → warm shutdown: stop polling, keep heartbeating, drain
  accepted work within the worker's ``shutdown_timeout``, then deregister;
* a second SIGTERM/SIGINT, or SIGQUIT at any time → cold stop: running work is
  abandoned (nothing is reported for it), the registration is kept, the process exits.

``-P gevent`` (or ``SYNC_WORKER_POOL=gevent``) needs a process patched before anything else
was imported: the ``sync-worker`` console script and ``python -m sync_worker`` do that
(``sync_worker._launcher``); an unpatched process gets a usage error saying how to fix it.
Under gevent the thread primitives are the patched, cooperative ones.

``-P prefork -c N`` runs N activity processes (and one workflow process when the worker has
workflows) under a supervising parent (:mod:`sync_worker.host.prefork`, docs/pools.md), with
``--max-tasks-per-child`` / ``--max-memory-per-child`` recycling; signals and exit codes are
the same.

Exit codes: 0 clean shutdown (registration removed); 1 the worker failed (registration
refused, a poller died, deregistration failed); 2 usage or configuration error; 3 warm
shutdown incomplete (work still running at the deadline; registration kept); 4 cold stop
(:mod:`sync_worker.host.exits`, re-exported here).

Connection: ``--server-url`` (alias ``--server``), ``--token``, ``--namespace``, else the
``DURABLE_WORKFLOW_*`` environment (:class:`sync_worker.host.ClientOptions`).
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from typing import Any, Dict, Mapping, Optional, Union

import click

from ..cli.params import (
    PREFORK,
    ConcurrencyParam,
    autoscale_bounds,
    configure_logging,
    import_target,
    loglevel_option,
    namespace_option,
    prefork_options,
    resolve_pool,
    server_url_option,
    token_option,
)
from ..host import serve as host_serve
from ..host.client_options import ClientOptions
from ..host.errors import OptionsError
from ..host.exits import EXIT_COLD_STOP, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE
from ..host.protocols import Servable
from ..runtime.backend import POOL_ENV
from .worker import Worker

__all__ = [
    "EXIT_COLD_STOP",
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "EXIT_USAGE",
    "load_worker",
    "run_command",
    "serve",
]

logger = logging.getLogger("sync_worker.worker.cli")

# The names these helpers had here before they moved to sync_worker.cli.params.
_import_target = import_target
_Concurrency = ConcurrencyParam
_autoscale = autoscale_bounds


def _make_client(server_url: Optional[str], token: Optional[str], namespace: Optional[str]) -> Any:
    """The Client of a factory's ``client`` parameter: the flags, else the ``DURABLE_WORKFLOW_*`` environment."""
    try:
        options = ClientOptions.from_env(server_url=server_url, token=token, namespace=namespace)
    except OptionsError as error:
        raise click.UsageError(str(error)) from None
    return options.or_default_server().build_client()


def load_worker(
    target: str,
    *,
    task_queue: Optional[str] = None,
    concurrency: Union[int, str, Mapping[str, Any], None] = None,
    server_url: Optional[str] = None,
    token: Optional[str] = None,
    namespace: Optional[str] = None,
    pool: Optional[str] = None,
    explicit: Optional[Mapping[str, Any]] = None,
) -> Worker:
    """Resolve ``MODULE:ATTR`` to a Worker (the attribute itself, or what its factory returns).

    A factory receives, by parameter name, any of ``client``, ``task_queue``,
    ``concurrency`` and ``pool`` it declares. With ``pool``, the worker must run on it.
    ``--server-url``/``--token``/``--namespace`` (``explicit``: those given on the command line)
    are refused for a ready-made Worker or a factory without ``client``: they would be ignored.
    """
    value = import_target(target)
    given = explicit or {}
    connection_flags = [flag for flag, key in (("--server-url", "server_url"), ("--token", "token"),
                                               ("--namespace", "namespace")) if given.get(key)]
    if isinstance(value, Worker):
        if connection_flags:
            raise click.UsageError(
                f"{target} is a ready-made Worker with its own Client ({value.client!r}); "
                f"{'/'.join(connection_flags)} would be ignored. Drop them, or make {target} a factory "
                "that takes a 'client' parameter so the command line can choose the server")
    else:
        kind = _not_a_worker(value)
        if kind is not None:
            raise click.UsageError(
                f"{target} is {kind}, not a Worker. Build one in your module, e.g. "
                "worker = Worker(Client(...), task_queue='...', activities=[...], workflows=[...]), "
                "or a factory def make_worker(client, task_queue): ..., and run that")
        params = inspect.signature(value).parameters
        if connection_flags and "client" not in params:
            raise click.UsageError(
                f"{target} takes no 'client' parameter, so {'/'.join(connection_flags)} would be ignored; "
                "add a 'client' parameter to the factory or drop the flags")
        kwargs: Dict[str, Any] = {}
        if "client" in params:
            kwargs["client"] = _make_client(server_url, token, namespace)
        if "task_queue" in params and task_queue:
            kwargs["task_queue"] = task_queue
        if "concurrency" in params and concurrency:
            kwargs["concurrency"] = concurrency
        if "pool" in params and pool:
            kwargs["pool"] = pool
        try:
            value = value(**kwargs)
        except click.ClickException:
            raise
        except Exception as error:
            raise click.UsageError(f"{target}(...) raised {type(error).__name__}: {error}") from error
        if not isinstance(value, Worker):
            raise click.UsageError(f"{target} returned {type(value).__name__}, not a Worker")
    if task_queue and value.task_queue != task_queue:
        raise click.UsageError(
            f"{target} serves task queue {value.task_queue!r}, not {task_queue!r}; use a factory "
            "that accepts task_queue to choose it from the command line"
        )
    if pool and value.backend.name != pool:
        raise click.UsageError(
            f"{target} built a worker on pool {value.backend.name!r}, but -P {pool} was requested; leave "
            "Worker(pool=...) unset (it follows SYNC_WORKER_POOL) or let the factory accept a pool argument"
        )
    if concurrency:
        value.configure_activity_concurrency(concurrency)
    return value


def _not_a_worker(value: Any) -> Optional[str]:
    """What ``value`` is, when it is a well-known thing that is not a Worker factory."""
    if getattr(value, "__activity_name__", None):
        return f"the activity {value.__activity_name__!r}"
    if getattr(value, "__workflow_name__", None):
        return f"the workflow {value.__workflow_name__!r}"
    if not callable(value):
        return f"a {type(value).__name__}, neither a Worker nor a factory returning one"
    return None


@click.command("run")
@click.argument("target")
@click.option("-Q", "--task-queue", default=None, help="Task queue the worker must serve.")
@click.option("-c", "--concurrency", type=ConcurrencyParam(), default=None,
              help="Activity slots: a fixed N, or 'adaptive' (memory admission gate and adaptive limit).")
@click.option("--autoscale", default=None, metavar="MAX,MIN",
              help="Adaptive activity slots between MIN (default 1) and MAX (Celery's spelling).")
@click.option("--activity-pollers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Activity pollers (max_concurrent_activity_task_polls; default 1). Each long-polls only while "
                   "it holds a free activity slot, so leases never exceed free slots; raise it when the "
                   "server's round trip, not the worker's CPU, limits throughput.")
@click.option("--workflow-pollers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Workflow-task pollers (max_concurrent_workflow_task_polls; default 1).")
@click.option("-P", "--pool", envvar=POOL_ENV, default=None,
              help="Concurrency pool: threads, gevent or prefork (-c N processes) (env SYNC_WORKER_POOL; "
                   "default: gevent in a monkey-patched process, else threads).")
@prefork_options()
@loglevel_option()
@click.option("--health-port", type=click.IntRange(min=0, max=65535), default=None, envvar="SYNC_WORKER_HEALTH_PORT",
              help="Serve /healthz (liveness) and /readyz (readiness) on this port of 127.0.0.1 "
                   "(0: any free port, logged; env SYNC_WORKER_HEALTH_PORT).")
@click.option("--health-host", default="127.0.0.1", show_default=True, help="Interface of the --health-port server.")
@click.option("--max-startup-wait", default=60.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Seconds to keep retrying discovery and registration while the server is unreachable or "
                   "refuses the credentials (0: exit at the first failure).")
@server_url_option()
@token_option()
@namespace_option()
def run_command(target: str, task_queue: Optional[str], concurrency: Union[int, str, None],
                autoscale: Optional[str], activity_pollers: Optional[int], workflow_pollers: Optional[int],
                pool: Optional[str], max_tasks_per_child: Optional[int], max_memory_per_child: Optional[int],
                loglevel: str, health_port: Optional[int],
                health_host: str, max_startup_wait: float,
                server_url: Optional[str], token: Optional[str], namespace: Optional[str]) -> None:
    """Run the worker TARGET (MODULE:ATTR: a Worker, or a factory returning one) until signalled."""
    bounds = autoscale_bounds(autoscale)
    if bounds is not None and concurrency is not None:
        raise click.UsageError("use either -c/--concurrency or --autoscale, not both")
    chosen: Union[int, str, Mapping[str, Any], None] = bounds if bounds is not None else concurrency
    # Checked before the target is imported: the app must not load into an unpatched gevent run.
    pool = resolve_pool(pool, allow_prefork=True)
    prefork = pool == PREFORK
    if prefork and (bounds is not None or concurrency == "adaptive"):
        raise click.UsageError("-P prefork takes a number of processes (-c N), not adaptive slots")
    if not prefork and (max_tasks_per_child or max_memory_per_child):
        raise click.UsageError("--max-tasks-per-child / --max-memory-per-child recycle the children of -P prefork")
    processes = int(concurrency or os.cpu_count() or 1) if prefork else 0
    if prefork:
        chosen, pool = None, "threads"  # the loaded worker is the children's template
    configure_logging(loglevel)
    # A Worker built while the target is imported follows -P (its default pool reads the env).
    previous = os.environ.get(POOL_ENV)
    os.environ[POOL_ENV] = pool
    # Only flags given on the command line can conflict with a ready-made Worker (the
    # DURABLE_WORKFLOW_* environment is read by ClientOptions, when a factory wants a client).
    explicit = {name: value for name, value in (("server_url", server_url), ("token", token),
                                                 ("namespace", namespace)) if value}
    try:
        worker = load_worker(target, task_queue=task_queue, concurrency=chosen, pool=pool,
                             server_url=server_url, token=token, namespace=namespace, explicit=explicit)
    finally:
        if previous is None:
            os.environ.pop(POOL_ENV, None)
        else:
            os.environ[POOL_ENV] = previous
    worker.max_startup_wait = max_startup_wait
    worker.configure_pollers(workflow=workflow_pollers, activity=activity_pollers)
    if prefork:
        sys.exit(_serve_prefork(worker, processes, max_tasks_per_child, max_memory_per_child, health_port,
                                health_host))
    logger.info("sync-worker %s: server %s, namespace %r, task queue %r, pool %s, slots %s workflow / %s activity, "
                "pollers %d workflow / %d activity, %d workflow and %d activity type(s); start-up waits up to "
                "%g s for the server",
                worker.worker_id, getattr(worker.client, "base_url", "?"), getattr(worker.client, "namespace", "?"),
                worker.task_queue, worker.backend.name, worker.max_concurrent_workflow_tasks,
                worker.max_concurrent_activity_tasks, worker.max_concurrent_workflow_task_polls,
                worker.max_concurrent_activity_task_polls, len(worker.workflows), len(worker.activities),
                max_startup_wait)
    health = None
    if health_port is not None:
        from ..health import HealthServer

        health = HealthServer(health_port, host=health_host).start()
        logger.info("health probes on http://%s:%d/healthz and /readyz", health_host, health.port)
    try:
        code = serve(worker)
    finally:
        if health is not None:
            health.stop()
    sys.exit(code)


def _serve_prefork(worker: Worker, processes: int, max_tasks: Optional[int], max_memory_kib: Optional[int],
                   health_port: Optional[int], health_host: str) -> int:
    from ..host.prefork import serve_prefork

    logger.info("sync-worker %s: server %s, namespace %r, task queue %r, pool prefork (%d process(es)), "
                "%d workflow and %d activity type(s)", worker.worker_id, getattr(worker.client, "base_url", "?"),
                getattr(worker.client, "namespace", "?"), worker.task_queue, processes, len(worker.workflows),
                len(worker.activities))
    return serve_prefork([worker], processes=processes, max_tasks_per_child=max_tasks,
                         max_memory_per_child=max_memory_kib * 1024 if max_memory_kib else None,
                         health_port=health_port, health_host=health_host, log=logger)


def serve(worker: Servable) -> int:
    """:func:`sync_worker.host.serve` with this command's logger: run ``worker`` until signalled,
    first SIGTERM/SIGINT warm, second (or SIGQUIT) cold; returns the exit code."""
    return host_serve(worker, log=logger)

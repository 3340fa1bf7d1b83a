"""``sync-worker celery -A proj worker -Q q -c 8 -P gevent -l info``: Celery's worker command.

A Procfile line ``celery -A proj worker -Q mail -c 8 -l info`` becomes
``sync-worker celery -A proj worker -Q mail -c 8 -l info``. ``-P gevent`` is patched before
anything loads (the ``sync-worker`` launcher reads argv first, as Celery's ``celery`` does).

Celery's worker flags: supported ones act (``-Q``, ``-c``, ``-P threads|gevent|prefork``, ``-l``,
``-n``, ``--time-limit``, ``--soft-time-limit``, ``--pidfile``, ``--logfile``, ``-B``, and with
``-P prefork`` ``--max-tasks-per-child`` / ``--max-memory-per-child``); ``-P prefork`` (Celery's
default pool) runs ``-c`` worker processes under a supervising parent, as Celery's does
(:mod:`sync_worker.host.prefork`, docs/pools.md); ``-P solo`` runs on threads with one slot (with
a notice); harmless ones (``--without-gossip``, ``--without-mingle``, ``--without-heartbeat``,
``-E``, ``-O``, ``--prefetch-multiplier``, ...) are accepted with a notice; ``-D/--detach``,
``-X`` and ``-P eventlet`` are refused with a reason.

Signals and exit codes are ``sync-worker run``'s (the same :func:`sync_worker.host.serve`, over
this app's :class:`~sync_worker_celery.worker.WorkerGroup`): TERM/INT warm shutdown (drain), a
second one or QUIT cold; exit 0 clean, 1 worker failed (one failed worker stops the others),
2 usage error, 3 drain incomplete, 4 cold stop.

The server: ``--server-url`` (alias ``--server``), ``--token``, ``--namespace`` fill the app's
``durable_workflow_*`` settings it does not set itself; the ``DURABLE_WORKFLOW_*`` environment
comes last (:class:`sync_worker.host.ClientOptions`).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any, List, Optional, Sequence

import click

from sync_worker.cli.params import (
    PREFORK,
    configure_logging,
    loglevel_option,
    namespace_option,
    resolve_pool,
    server_url_option,
    token_option,
)
from sync_worker.host import ServeMessages, serve
from sync_worker.host.client_options import SERVER_URL_ENV

from . import notices, signals

__all__ = ["celery_command", "find_app", "main"]

logger = logging.getLogger("sync_worker.celery.cli")

CELERY_LOG_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"


def find_app(name: str) -> Any:
    """Resolve ``-A``: ``proj``, ``proj.celery``, ``proj:app`` or ``proj.celery:app`` (as Celery does)."""
    from .app import Celery

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise click.UsageError(f"-A {name}: cannot import {module_name!r}: {error}") from None
    if attribute:
        value: Any = module
        for part in attribute.split("."):
            value = getattr(value, part, None)
        if callable(value) and not isinstance(value, Celery):
            value = value()
        if not isinstance(value, Celery):
            raise click.UsageError(f"-A {name}: {attribute!r} is not a Celery app")
        return value
    for candidate in ("app", "celery"):
        value = getattr(module, candidate, None)
        if isinstance(value, Celery):
            return value
    try:
        sub = importlib.import_module(f"{module_name}.celery")
    except ImportError:
        sub = None
    if sub is not None:
        for candidate in ("app", "celery"):
            value = getattr(sub, candidate, None)
            if isinstance(value, Celery):
                return value
    found = [v for v in vars(module).values() if isinstance(v, Celery)]
    if len(found) == 1:
        return found[0]
    raise click.UsageError(f"-A {name}: no Celery app found (looked for 'app' and 'celery', also in "
                           f"{module_name}.celery)")


#: The warm and cold stop lines of Celery's worker.
_MESSAGES = ServeMessages(warm="warm shutdown (MainProcess): draining running tasks",
                          cold="cold shutdown: abandoning running tasks")


def _serve(app: Any, workers: List[Any], beat: bool) -> int:
    """Serve the app's workers until signalled (:func:`sync_worker.host.serve`); the exit code."""
    from .worker import WorkerGroup

    group = WorkerGroup(app, workers)
    server = getattr(getattr(workers[0], "client", None), "base_url", None) if workers else None
    logger.info("celery@%s ready: queues %s%s", group.hostname, ", ".join(w.task_queue for w in workers),
                f" (server {server})" if server else "")
    return serve(group, log=logger, messages=_MESSAGES)


def _serve_prefork(app: Any, workers: List[Any], processes: int, max_tasks: Optional[int],
                   max_memory_kib: Optional[int]) -> int:
    """Serve the app's workers on a prefork pool, with Celery's prefork signals: ``worker_init`` and
    ``worker_shutdown`` here in the parent, ``worker_process_init`` / ``worker_process_shutdown`` in
    each child (its WorkerGroup); ``worker_ready`` and ``worker_shutting_down`` are not sent (the
    parent runs no worker of its own)."""
    from sync_worker.host.prefork import serve_prefork

    from .worker import WorkerGroup

    hostname = workers[0].worker_id if workers else None
    logger.info("celery@%s: prefork pool of %d process(es), queues %s", hostname or "?", processes,
                ", ".join(w.task_queue for w in workers))
    signals.worker_init.send(sender=hostname)
    try:
        return serve_prefork(workers, processes=processes,
                             group=lambda members: WorkerGroup(app, members, process_child=True),
                             max_tasks_per_child=max_tasks,
                             max_memory_per_child=max_memory_kib * 1024 if max_memory_kib else None, log=logger)
    finally:
        signals.worker_shutdown.send(sender=hostname)


_NOTICE_FLAGS = {
    "without_gossip": "--without-gossip", "without_mingle": "--without-mingle",
    "without_heartbeat": "--without-heartbeat", "events": "-E/--events", "optimization": "-O",
    "prefetch_multiplier": "--prefetch-multiplier", "disable_prefetch": "--disable-prefetch",
    "heartbeat_interval": "--heartbeat-interval", "autoscale": "--autoscale", "scheduler": "--scheduler",
    "state_db": "--statedb", "purge": "--purge", "task_events": "-E",
}


@click.group("celery", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-A", "--app", "app_name", required=True, help="The Celery app: proj, proj.celery or proj:app.")
@click.option("-b", "--broker", default=None, help="Accepted and ignored: the Durable Workflow server is the broker.")
@click.option("--result-backend", default=None, help="Accepted and ignored: the server keeps results.")
@click.option("--loader", default=None, hidden=True)
@click.option("--config", default=None, help="Module to read settings from (config_from_object).")
@click.option("--workdir", default=None, help="Change to this directory first.")
@server_url_option(help=f"Durable Workflow server, where the app does not set durable_workflow_server_url "
                        f"(else env {SERVER_URL_ENV}); --server is an alias.")
@token_option(help="Auth token, where the app does not set durable_workflow_auth_token (else env).")
@namespace_option(help="Namespace, where the app does not set durable_workflow_namespace (else env).")
@click.option("-q", "--quiet", is_flag=True, hidden=True)
@click.option("--no-color", is_flag=True, hidden=True)
@click.pass_context
def celery_command(ctx: click.Context, app_name: str, broker: Optional[str], result_backend: Optional[str],
                   loader: Optional[str], config: Optional[str], workdir: Optional[str], server_url: Optional[str],
                   token: Optional[str], namespace: Optional[str], quiet: bool, no_color: bool) -> None:
    """Celery's command line for a sync_worker_celery app (worker, beat)."""
    if workdir:
        os.chdir(workdir)
    ctx.obj = {**(ctx.obj or {}), "app_name": app_name, "config": config, "server_url": server_url, "token": token,
               "namespace": namespace}
    if broker:
        notices.once("cli:broker", "-b/--broker is ignored: the Durable Workflow server is the broker")
    if result_backend:
        notices.once("cli:backend", "--result-backend is ignored: the server keeps results")


def _load_app(obj: Any) -> Any:
    app = obj.get("app") or find_app(obj["app_name"])
    if obj.get("config"):
        app.config_from_object(obj["config"])
    for key, setting in (("server_url", "durable_workflow_server_url"), ("token", "durable_workflow_auth_token"),
                         ("namespace", "durable_workflow_namespace")):
        if obj.get(key) and not app.conf.get(setting):
            app.conf[setting] = obj[key]
    return app


@celery_command.command("worker", context_settings={"ignore_unknown_options": False})
@click.option("-Q", "--queues", default=None, help="Comma-separated queues (default: task_default_queue).")
@click.option("-X", "--exclude-queues", default=None, hidden=True)
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=None, help="Concurrent tasks per queue.")
@click.option("-P", "--pool", default=None,
              help="threads, gevent or prefork (-c processes; Celery's default); solo runs on threads.")
@loglevel_option(default="WARNING", help="Logging level (alias --log-level).")
@click.option("-n", "--hostname", default=None, help="Worker name (the worker id on the server).")
@click.option("--time-limit", type=float, default=None, help="Hard time limit for every task (seconds).")
@click.option("--soft-time-limit", type=float, default=None, help="Soft time limit for every task (seconds).")
@click.option("-B", "--beat", is_flag=True, help="Install beat_schedule as server schedules at start.")
@click.option("-D", "--detach", is_flag=True, hidden=True)
@click.option("--pidfile", default=None, help="Write the process id here.")
@click.option("-f", "--logfile", default=None, help="Log to this file.")
@click.option("-E", "--task-events", "events", is_flag=True, hidden=True)
@click.option("-O", "optimization", default=None, hidden=True)
@click.option("--without-gossip", is_flag=True, hidden=True)
@click.option("--without-mingle", is_flag=True, hidden=True)
@click.option("--without-heartbeat", is_flag=True, hidden=True)
@click.option("--heartbeat-interval", default=None, hidden=True)
@click.option("--prefetch-multiplier", default=None, hidden=True)
@click.option("--disable-prefetch", is_flag=True, hidden=True)
@click.option("--max-tasks-per-child", type=click.IntRange(min=1), default=None,
              help="-P prefork: replace a child after it ran N tasks.")
@click.option("--max-memory-per-child", type=click.IntRange(min=1), default=None,
              help="-P prefork: replace a child once its resident set passes this many KiB (after its task).")
@click.option("--autoscale", default=None, hidden=True)
@click.option("-s", "--schedule", "scheduler", default=None, hidden=True)
@click.option("-S", "--statedb", "state_db", default=None, hidden=True)
@click.option("--purge", "--discard", "purge", is_flag=True, hidden=True)
@click.pass_obj
def worker_command(obj: Any, /, queues: Optional[str], exclude_queues: Optional[str], concurrency: Optional[int],
                   pool: Optional[str], loglevel: str, hostname: Optional[str], time_limit: Optional[float],
                   soft_time_limit: Optional[float], beat: bool, detach: bool, pidfile: Optional[str],
                   logfile: Optional[str], max_tasks_per_child: Optional[int],
                   max_memory_per_child: Optional[int], **harmless: Any) -> None:
    """Serve the app's tasks and canvases on the given queues until signalled."""
    from sync_worker.runtime.backend import POOL_ENV

    if detach:
        raise click.UsageError("-D/--detach is not supported: run the worker under your process manager "
                               "(systemd, supervisord, Kubernetes) in the foreground")
    if exclude_queues:
        raise click.UsageError("-X/--exclude-queues is not supported: name the queues to serve with -Q")
    handlers: List[logging.Handler] = [logging.FileHandler(logfile) if logfile else logging.StreamHandler()]
    configure_logging(loglevel, format=CELERY_LOG_FORMAT, handlers=handlers)
    for option, flag in _NOTICE_FLAGS.items():
        if harmless.get(option):
            notices.once(f"cli:{option}", f"{flag} is accepted and ignored (it has no meaning here)")
    name: Optional[str] = (pool or "").lower() or None
    if name in ("solo", "custom"):
        notices.once("cli:pool", f"-P {name} runs on threads; use -P prefork for processes, -P gevent for greenlets")
        if name == "solo":
            concurrency = 1
        name = "threads"
    if name == "eventlet":
        raise click.UsageError("-P eventlet is not supported: use -P gevent")
    prefork = resolve_pool(name, allow_prefork=True) == PREFORK
    if not prefork and (max_tasks_per_child or max_memory_per_child):
        notices.once("cli:recycle", "--max-tasks-per-child / --max-memory-per-child recycle the processes of "
                                    "-P prefork; ignored on this pool")
    resolved = "threads" if prefork else resolve_pool(name)
    os.environ[POOL_ENV] = resolved
    app = _load_app(obj)
    if time_limit is not None:
        app.conf.task_time_limit = time_limit
    if soft_time_limit is not None:
        app.conf.task_soft_time_limit = soft_time_limit
    if pidfile:
        with open(pidfile, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    signals.celeryd_init.send(sender=hostname, instance=None, conf=app.conf, options={})
    queue_list = [q.strip() for q in (queues or "").split(",") if q.strip()] or None
    try:
        workers = app.workers_for(queue_list, concurrency=concurrency, pool=resolved, hostname=hostname)
    except Exception as error:
        raise click.UsageError(f"cannot start the worker: {type(error).__name__}: {error}") from None
    signals.celeryd_after_setup.send(sender=hostname, instance=None, conf=app.conf)
    if beat:
        _install_beat(app)
    if prefork:
        code = _serve_prefork(app, workers, concurrency or os.cpu_count() or 1, max_tasks_per_child,
                              max_memory_per_child)
    else:
        code = _serve(app, workers, beat)
    if pidfile and os.path.exists(pidfile):
        os.unlink(pidfile)
    sys.exit(code)


@celery_command.command("beat")
@loglevel_option(default="WARNING", help="Logging level (alias --log-level).")
@click.option("-s", "--schedule", default=None, hidden=True)
@click.pass_obj
def beat_command(obj: Any, loglevel: str, schedule: Optional[str]) -> None:
    """Install the app's beat_schedule as server-side schedules, then exit (the server runs them)."""
    configure_logging(loglevel, format=CELERY_LOG_FORMAT)
    app = _load_app(obj)
    installed = _install_beat(app)
    click.echo(f"installed {len(installed)} schedule(s): {', '.join(installed) or '-'}")


def _install_beat(app: Any) -> List[str]:
    from sync_worker.errors import DurableWorkflowError

    from .beat import install_beat_schedule
    from .exceptions import UnsupportedFeature

    try:
        installed = install_beat_schedule(app)
    except UnsupportedFeature as error:
        raise click.ClickException(str(error)) from None
    except DurableWorkflowError as error:
        raise click.ClickException(f"beat_schedule could not be installed: {type(error).__name__}: {error}") from None
    for schedule_id in installed:
        logger.info("beat: server schedule %s installed", schedule_id)
    return installed


def main(argv: Optional[Sequence[str]] = None, app: Any = None) -> None:
    """Run the ``celery`` command group (``app.worker_main(argv)`` comes here)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if app is not None:
        args = ["-A", "__given__", *args]
        celery_command.main(args=args, prog_name="sync-worker celery", obj={"app": app})
        return
    celery_command.main(args=args, prog_name="sync-worker celery")

"""``python manage.py durable_worker``: run the project's workers in the foreground, Celery style.

Flags (each overrides ``settings.SYNC_WORKER`` and the environment variables):
``-Q/--queues a,b`` task queues (one worker each), ``-c/--concurrency`` activity slots,
``--workflow-concurrency`` workflow slots, ``-P/--pool threads|gevent|prefork``, ``-l/--loglevel``
(default: from ``--verbosity``), ``--shutdown-timeout`` seconds, ``--health-port``
(``/healthz`` and ``/readyz``; 0 picks a free port), ``--server-url`` (alias ``--server``), ``--namespace``,
``--reload`` (development: restart on code changes), ``--no-autodiscover``.

Signals and exit codes are those of ``sync-worker run`` (:func:`sync_worker.host.serve`, over a
:class:`sync_worker.host.WorkerGroup`): first SIGTERM/SIGINT warm (drain
within the shutdown timeout, deregister), second cold, SIGQUIT cold; exit 0 clean,
1 failed, 2 configuration error, 3 drain incomplete, 4 cold stop.

``-P gevent`` re-executes the command in a fresh interpreter patched before Django loads.
``-P prefork`` (or ``SYNC_WORKER['POOL'] = "prefork"``) runs ``-c`` worker processes (default: one
per CPU) under a supervising parent, with ``--max-tasks-per-child`` / ``--max-memory-per-child``
recycling; Django's database connections are closed before every fork
(:mod:`sync_worker.host.prefork`, docs/pools.md).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Dict, List, Optional

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser, SystemCheckError

from sync_worker import Worker
from sync_worker.cli.params import LOG_FORMAT_ENV
from sync_worker.health import HealthServer
from sync_worker.host import EXIT_USAGE, WorkerGroup, serve
from sync_worker.runtime.log_context import formatter_for

from ...conf import get_config, raw_settings, set_command_overrides
from ...discovery import Discovered, autodiscover
from ...runner import gevent_patched, reexec_patched_for_gevent
from ...workers import build_workers

logger = logging.getLogger("sync_worker.django.command")

_VERBOSITY_LEVELS = {0: "WARNING", 1: "INFO", 2: "DEBUG", 3: "DEBUG"}


class Command(BaseCommand):
    help = "Run Durable Workflow workers for this project's workflows, activities and django.tasks tasks."
    requires_system_checks: Any = "__all__"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-Q", "--queues", default=None,
                            help="Comma-separated task queues to serve (default: SYNC_WORKER['TASK_QUEUES']).")
        parser.add_argument("-c", "--concurrency", type=int, default=None, help="Activity slots per queue.")
        parser.add_argument("--workflow-concurrency", type=int, default=None, help="Workflow-task slots per queue.")
        parser.add_argument("--activity-pollers", type=int, default=None,
                            help="Activity pollers per queue (ACTIVITY_POLLERS; default 1).")
        parser.add_argument("--workflow-pollers", type=int, default=None,
                            help="Workflow-task pollers per queue (WORKFLOW_POLLERS; default 1).")
        parser.add_argument("-P", "--pool", choices=["threads", "gevent", "prefork"], default=None,
                            help="Concurrency pool (default: SYNC_WORKER['POOL'], else threads); prefork: -c "
                                 "processes (default one per CPU).")
        parser.add_argument("--max-tasks-per-child", type=int, default=None,
                            help="-P prefork: replace a child process after it ran N activities.")
        parser.add_argument("--max-memory-per-child", type=int, default=None, metavar="KIB",
                            help="-P prefork: replace a child once its resident set passes KIB kilobytes.")
        parser.add_argument("-l", "--loglevel", "--log-level", dest="loglevel", default=None,
                            help="Logging level (default: from --verbosity).")
        parser.add_argument("--log-format", dest="log_format", choices=["text", "json"], default=None,
                            help="text, or json: one JSON object per line with the task's ids (default: "
                                 "SYNC_WORKER['LOG_FORMAT'], else env SYNC_WORKER_LOG_FORMAT, else text).")
        parser.add_argument("--shutdown-timeout", type=float, default=None,
                            help="Seconds a warm shutdown waits for running tasks.")
        parser.add_argument("--health-port", type=int, default=None,
                            help="Serve /healthz and /readyz on this port (0: any free port).")
        parser.add_argument("--server-url", "--server", dest="server_url", default=None,
                            help="Server origin (overrides settings and env); --server is an alias.")
        parser.add_argument("--namespace", default=None, help="Namespace (overrides settings and env).")
        parser.add_argument("--reload", action="store_true",
                            help="Development: restart when code changes (signals are not handled gracefully).")
        parser.add_argument("--no-autodiscover", action="store_true",
                            help="Do not import the apps' workflows/activities/tasks modules.")

    def _overrides(self, options: Dict[str, Any]) -> Dict[str, Any]:
        queues: Optional[List[str]] = None
        if options.get("queues"):
            queues = [q.strip() for q in str(options["queues"]).split(",") if q.strip()]
        return {
            "TASK_QUEUES": queues, "CONCURRENCY": options.get("concurrency"),
            "WORKFLOW_CONCURRENCY": options.get("workflow_concurrency"), "POOL": options.get("pool"),
            "ACTIVITY_POLLERS": options.get("activity_pollers"), "WORKFLOW_POLLERS": options.get("workflow_pollers"),
            "SHUTDOWN_TIMEOUT": options.get("shutdown_timeout"), "HEALTH_PORT": options.get("health_port"),
            "SERVER_URL": options.get("server_url"), "NAMESPACE": options.get("namespace"),
        }

    def _configure_logging(self, options: Dict[str, Any]) -> None:
        """``--loglevel`` (else from ``--verbosity``) and ``--log-format`` (else the setting, else env)."""
        name = options.get("loglevel") or _VERBOSITY_LEVELS.get(int(options.get("verbosity", 1)), "INFO")
        level = logging.getLevelName(str(name).upper())
        if not isinstance(level, int):
            raise CommandError(f"unknown log level {name!r}", returncode=EXIT_USAGE)
        chosen = options.get("log_format") or _setting_log_format() or os.environ.get(LOG_FORMAT_ENV)
        try:
            formatter = formatter_for(chosen)
        except ValueError as error:
            raise CommandError(str(error), returncode=EXIT_USAGE) from None
        if chosen:
            os.environ[LOG_FORMAT_ENV] = str(chosen).lower()  # the --reload child and a gevent re-exec too
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter)
        logging.basicConfig(level=level, handlers=[handler])
        logging.getLogger("sync_worker").setLevel(level)

    def execute(self, *args: Any, **options: Any) -> Any:
        set_command_overrides(self._overrides(options))  # the system checks see the flags too
        try:
            return super().execute(*args, **options)
        except SystemCheckError as error:  # a configuration error: exit 2, as `sync-worker run` does
            raise CommandError(str(error), returncode=EXIT_USAGE) from error

    def handle(self, *args: Any, **options: Any) -> None:
        overrides = self._overrides(options)
        try:
            config = get_config(overrides)
        except ImproperlyConfigured as error:
            raise CommandError(str(error), returncode=EXIT_USAGE)
        pool = config.pool or os.environ.get("SYNC_WORKER_POOL") or "threads"
        if pool == "gevent" and not gevent_patched():
            try:
                reexec_patched_for_gevent(sys.argv)
            except RuntimeError as error:
                raise CommandError(str(error), returncode=EXIT_USAGE)
        overrides["POOL"] = pool
        self._configure_logging(options)
        if pool == "prefork":
            sys.exit(self._serve_prefork(overrides, options))
        if options.get("reload"):
            from django.utils import autoreload

            autoreload.run_with_reloader(self._run_reloading, overrides=overrides, options=options)
            return
        for flag in ("max_tasks_per_child", "max_memory_per_child"):
            if options.get(flag) is not None:
                raise CommandError(f"--{flag.replace('_', '-')} recycles the processes of -P prefork",
                                   returncode=EXIT_USAGE)
        sys.exit(self._serve(overrides, options))

    def _serve_prefork(self, overrides: Dict[str, Any], options: Dict[str, Any]) -> int:
        from sync_worker.host.prefork import serve_prefork

        for flag in ("concurrency", "max_tasks_per_child", "max_memory_per_child"):
            if options.get(flag) is not None and int(options[flag]) < 1:
                raise CommandError(f"--{flag.replace('_', '-')} must be at least 1", returncode=EXIT_USAGE)
        if options.get("reload"):
            raise CommandError("--reload runs one process; drop -P prefork while developing", returncode=EXIT_USAGE)
        group = self._build(overrides, options)
        processes = int(options.get("concurrency") or os.cpu_count() or 1)
        queues = ", ".join(w.task_queue for w in group.workers)
        self.stdout.write(f"durable_worker: serving {queues} on pool prefork ({processes} process(es), "
                          f"pid {os.getpid()})")
        self.stdout.flush()
        memory = options.get("max_memory_per_child")
        code = serve_prefork(group.workers, processes=processes, max_tasks_per_child=options.get("max_tasks_per_child"),
                             max_memory_per_child=int(memory) * 1024 if memory else None,
                             health_port=get_config(overrides).health_port, log=logger)
        self.stdout.write(f"durable_worker: stopped (exit {code})")
        self.stdout.flush()
        return code

    def _build(self, overrides: Dict[str, Any], options: Dict[str, Any]) -> WorkerGroup[Worker]:
        discovered = Discovered() if options.get("no_autodiscover") else autodiscover(
            get_config(overrides).autodiscover_modules)
        try:
            # one at a time: registration reads workflow sources with ast, which CPython 3.11
            # cannot always do in two threads at once (gh-106905)
            return WorkerGroup(build_workers(overrides=overrides, discovered=discovered), start_one_at_a_time=True)
        except ImproperlyConfigured as error:
            raise CommandError(str(error), returncode=EXIT_USAGE)

    def _start_health(self, overrides: Dict[str, Any], group: WorkerGroup[Worker]) -> Optional[HealthServer]:
        port = get_config(overrides).health_port
        if port is None:
            return None
        health = HealthServer(port, workers=lambda: group.workers).start()
        self.stdout.write(f"health probes on http://127.0.0.1:{health.port}/healthz and /readyz")
        self.stdout.flush()
        return health

    def _serve(self, overrides: Dict[str, Any], options: Dict[str, Any]) -> int:
        group = self._build(overrides, options)
        health = self._start_health(overrides, group)
        queues = ", ".join(w.task_queue for w in group.workers)
        self.stdout.write(f"durable_worker: serving {queues} on pool {group.pool} (pid {os.getpid()})")
        self.stdout.flush()
        try:
            code = serve(group, log=logger)
        finally:
            if health is not None:
                health.stop()
            from django.db import connections

            connections.close_all()
        self.stdout.write(f"durable_worker: stopped (exit {code})")
        self.stdout.flush()
        return code

    def _run_reloading(self, overrides: Dict[str, Any], options: Dict[str, Any]) -> None:
        """The autoreloader's child: run the workers until the reloader restarts the process.

        Django's reloader exits this process as soon as a file changes (its main thread calls
        ``sys.exit(3)``; the workers run on a daemon thread), which would abandon running tasks.
        A ``file_changed`` receiver stops the group warm first, so running tasks finish and are
        reported (within ``--shutdown-timeout``) before the restart; it returns None, so the
        reload then goes ahead as usual.
        """
        from django.utils import autoreload

        group = self._build(overrides, options)
        self._start_health(overrides, group)

        def drain_before_reload(sender: Any, file_path: Any, **kwargs: Any) -> None:
            logger.info("%s changed: draining running tasks before the reload", file_path)
            group.stop()
            logger.info("drained; reloading")

        autoreload.file_changed.connect(drain_before_reload, dispatch_uid="sync_worker_django.drain_before_reload",
                                        weak=False)
        self.stdout.write(f"durable_worker: serving {', '.join(w.task_queue for w in group.workers)} on pool "
                          f"{group.pool} (reloading on code changes, pid {os.getpid()})")
        self.stdout.flush()
        group.run()


def _setting_log_format() -> Optional[str]:
    raw = raw_settings()
    value = raw.get("LOG_FORMAT") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else None

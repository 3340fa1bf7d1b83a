"""``python manage.py durable_devserver``: the embedded development server, with the project's settings.

Binds the host and port of ``SYNC_WORKER['SERVER_URL']`` (flags override), requires
``SYNC_WORKER['TOKEN']`` (and the per-plane ``WORKER_TOKEN`` / ``CONTROL_TOKEN``) when set and
serves ``SYNC_WORKER['NAMESPACE']``, so
``durable_worker`` and the web process reach it with no further configuration. Runs until
SIGINT/SIGTERM. For development and tests only; production points at the real server.
``--cpu`` (env ``SYNC_WORKER_DEVSERVER_CPU``) pins the process as ``sync-worker devserver --cpu`` does:
by default to the core it starts on (``sync_worker/devserver/affinity.py``, docs/devserver.md).
"""

from __future__ import annotations

import os
from typing import Any, Optional
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sync_worker.devserver import DevServer, affinity
from sync_worker.host.wakeup import until_stop_signal

from ...conf import raw_settings


class Command(BaseCommand):
    help = "Run the embedded Durable Workflow development server with this project's SYNC_WORKER settings."
    requires_system_checks: Any = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=None, help="Interface (default: SERVER_URL's host).")
        parser.add_argument("--port", type=int, default=None, help="Port (default: SERVER_URL's port; 0: any).")
        parser.add_argument("--db", default=":memory:", help="SQLite file for durable state (default: memory).")
        parser.add_argument("--cpu", default=None,
                            help="CPU affinity: auto (default) pins the process to the core it starts on, none "
                                 "leaves it, N pins to core N (env SYNC_WORKER_DEVSERVER_CPU).")

    def handle(self, *args: Any, **options: Any) -> None:
        raw = raw_settings() or {}
        url = urlsplit(str(raw.get("SERVER_URL") or "http://127.0.0.1:7233"))
        host: str = options.get("host") or url.hostname or "127.0.0.1"
        port_option: Optional[int] = options.get("port")
        port = port_option if port_option is not None else (url.port or 7233)
        namespace = str(raw.get("NAMESPACE") or "default")
        try:  # before the server's threads start: they inherit it
            pinned = affinity.apply(options.get("cpu") or os.environ.get("SYNC_WORKER_DEVSERVER_CPU") or "auto")
        except affinity.AffinityError as exc:
            raise CommandError(str(exc)) from None
        server = DevServer(port=port, db=options["db"], token=raw.get("TOKEN"), namespaces=(namespace,), host=host,
                           worker_token=raw.get("WORKER_TOKEN"), control_token=raw.get("CONTROL_TOKEN"))
        with until_stop_signal() as wait_for_signal:  # handlers that never take a lock (see its docstring)
            try:
                server.start()
                self.stdout.write(f"Durable Workflow dev server listening on {server.url} (db={options['db']}, "
                                  f"namespace={namespace}"
                                  + (f", pinned to CPU {pinned}" if pinned is not None else "") + ")")
                self.stdout.flush()
                wait_for_signal()
            finally:
                server.stop()

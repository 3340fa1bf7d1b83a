"""``sync-worker devserver``: run the embedded development server until SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any, Optional, Tuple

import click

from .app import DevServer

log = logging.getLogger("sync_worker.devserver")


@click.command("devserver")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=7233, show_default=True, type=int, help="Port to bind (0 = any free port).")
@click.option("--db", default=":memory:", show_default=True,
              help="SQLite file for durable state, or :memory: for a throwaway server.")
@click.option("--token", default=None, envvar="DURABLE_WORKFLOW_AUTH_TOKEN",
              help="Require this bearer token on every API call (open when unset).")
@click.option("--namespace", "namespaces", multiple=True, default=("default",), show_default=True,
              help="Namespace to serve (repeatable).")
@click.option("--workflow-timeouts/--no-workflow-timeouts", default=True, show_default=True,
              help="Enforce workflow run/execution timeouts (the SDK always sends 600 s / 3600 s).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def devserver_command(host: str, port: int, db: str, token: Optional[str], namespaces: Tuple[str, ...],
                      workflow_timeouts: bool, log_level: str) -> None:
    """Run a single-process Durable Workflow server for development (not for production)."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:  # handlers only set a flag; the loop acts
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = DevServer(port=port, db=db, token=token, namespaces=namespaces or ("default",), host=host,
                       enforce_workflow_timeouts=workflow_timeouts)
    try:
        server.start()
        click.echo(f"Durable Workflow dev server listening on {server.url} (db={db}, "
                   f"namespaces={','.join(server.config.namespaces)})", err=True)
        while not stop.wait(0.5):
            pass
        click.echo("dev server stopping", err=True)
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

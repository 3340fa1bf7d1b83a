"""``sync-worker devserver``: run the embedded development server until SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import os
from typing import Optional, Tuple

import click

from ..cli.params import LOG_FORMAT_ENV, configure_logging, log_format_option
from ..host.wakeup import until_stop_signal
from . import affinity
from .app import DevServer

log = logging.getLogger("sync_worker.devserver")


@click.command("devserver")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=7233, show_default=True, type=int, help="Port to bind (0 = any free port).")
@click.option("--db", default=":memory:", show_default=True,
              help="SQLite file for durable state, or :memory: for a throwaway server.")
@click.option("--token", default=None, envvar=["DURABLE_WORKFLOW_AUTH_TOKEN", "DW_AUTH_TOKEN"],
              help="Shared bearer token accepted on every plane (open when no token is set).")
@click.option("--worker-token", default=None, envvar=["DURABLE_WORKFLOW_WORKER_TOKEN", "DW_WORKER_TOKEN"],
              help="Role token for the worker plane only (polls, completions, heartbeats).")
@click.option("--control-token", default=None,
              envvar=["DURABLE_WORKFLOW_CONTROL_TOKEN", "DW_OPERATOR_TOKEN"],
              help="Role token for the control plane only (start, signal, cancel, terminate, list).")
@click.option("--workflow-task-lease", "workflow_task_lease", default=60.0, show_default=True,
              type=click.FloatRange(min=0.1), help="Seconds a worker holds a workflow task before it is retried.")
@click.option("--activity-task-lease", "activity_task_lease", default=300.0, show_default=True,
              type=click.FloatRange(min=0.1),
              help="Seconds an activity attempt without start_to_close_timeout is leased.")
@click.option("--query-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds a query waits for a worker to answer.")
@click.option("--long-poll-max", "long_poll_max", default=60.0, show_default=True,
              type=click.FloatRange(min=0.0, max=60.0), help="Longest a poll is held open, in seconds.")
@click.option("--worker-heartbeat-interval", "heartbeat_interval", default=60, show_default=True,
              type=click.IntRange(min=1), help="Worker heartbeat interval advertised at registration.")
@click.option("--worker-stale-after", "stale_after", default=120, show_default=True, type=click.IntRange(min=1),
              help="Seconds without a heartbeat after which a worker counts as stale.")
@click.option("--namespace", "namespaces", multiple=True, default=("default",), show_default=True,
              help="Namespace to create at start (repeatable); more through /api/namespaces.")
@click.option("--workflow-timeouts/--no-workflow-timeouts", default=True, show_default=True,
              help="Enforce workflow run/execution timeouts (the SDK always sends 600 s / 3600 s).")
@click.option("--trace-context/--no-trace-context", default=False, show_default=True,
              help="Keep and hand back W3C trace-context carriers (the SDK's observability_context; "
                   "the real server does not yet).")
@click.option("--cpu", "cpu", default="auto", show_default=True, envvar="SYNC_WORKER_DEVSERVER_CPU",
              help="CPU affinity: auto pins the process to the core it starts on (its threads share one "
                   "interpreter lock, so one core serves them best; docs/devserver.md), none leaves it, "
                   "N pins to core N.")
@click.option("-l", "--loglevel", "--log-level", "log_level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@log_format_option()
def devserver_command(host: str, port: int, db: str, token: Optional[str], worker_token: Optional[str],
                      control_token: Optional[str], workflow_task_lease: float, activity_task_lease: float,
                      query_timeout: float, long_poll_max: float, heartbeat_interval: int, stale_after: int,
                      namespaces: Tuple[str, ...], workflow_timeouts: bool, trace_context: bool,
                      cpu: str, log_level: str) -> None:
    """Run a single-process Durable Workflow server for development (not for production)."""
    configure_logging(log_level)
    try:
        pinned = affinity.apply(cpu)  # before the server's threads start: they inherit it
    except affinity.AffinityError as exc:
        raise click.BadParameter(str(exc), param_hint="--cpu") from None
    as_json = os.environ.get(LOG_FORMAT_ENV, "text").lower() == "json"

    def say(line: str) -> None:  # json: every line of the process is one JSON object
        if as_json:
            log.info(line)
        else:
            click.echo(line, err=True)
    server = DevServer(port=port, db=db, token=token, namespaces=namespaces or ("default",), host=host,
                       enforce_workflow_timeouts=workflow_timeouts, worker_token=worker_token,
                       control_token=control_token, workflow_task_lease_seconds=workflow_task_lease,
                       activity_task_lease_seconds=activity_task_lease, query_timeout_seconds=query_timeout,
                       long_poll_max_seconds=long_poll_max, heartbeat_interval_seconds=heartbeat_interval,
                       stale_after_seconds=stale_after, trace_context=trace_context)
    with until_stop_signal() as wait_for_signal:
        try:
            server.start()
            say(f"Durable Workflow dev server listening on {server.url} (db={db}, "
                f"namespaces={','.join(server.config.namespaces)}"
                + (f", pinned to CPU {pinned}" if pinned is not None else "") + ")")
            say(f"Web UI: {server.url}/ui/")
            wait_for_signal()
            say("dev server stopping")
        finally:
            server.stop()

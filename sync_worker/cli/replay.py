"""``sync-worker replay``: prove the current workflow code still replays recorded runs (for CI).

    sync-worker replay myapp.workflows -f histories/              # every *.json under the folder
    sync-worker replay myapp.workflows:WORKFLOWS --workflow-id order-42 --server-url http://...
    sync-worker replay myapp.worker:worker --query acme --status running

``TARGET`` names the workflow classes: a module (every ``@workflow.defn`` class defined in it),
or ``MODULE:ATTR`` for a class, a list of classes or a ``Worker`` (its workflows). Histories
come from files (``-f``: a JSON list of events, ``{"events": [...]}`` or a history export;
a folder means every ``*.json`` in it) and/or from a server: ``--workflow-id`` (repeatable;
``--run-id`` picks a run of a single one) and the workflow list filters ``--query`` (workflow id
or business key contains it, as the server matches), ``--workflow-type``, ``--status``, ``--limit``.

Each history is replayed against its workflow type's class. A history whose type no target
registers is skipped (listed, not a failure). Exit code: 0 when everything replayed, 1 on any
non-determinism or history that could not be replayed, 2 for bad usage (no workflows, no
histories), 3 when the server cannot be reached. ``--json`` prints the report as JSON.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import types
from typing import Any, Iterator, List, Optional, Tuple

import click

from ..host.client_options import SERVER_URL_ENV, ClientOptions
from ..host.errors import OptionsError
from ._common import DEFAULT_SERVER, EXIT_FAILURE, EXIT_INVALID, EXIT_NETWORK, EXIT_OK
from .params import import_target, namespace_option, server_url_option, token_option

__all__ = ["replay_command", "workflow_classes"]


def workflow_classes(target: str) -> List[type]:
    """The workflow classes ``target`` names (see the module docstring); a usage error if none."""
    if ":" in target:
        value = import_target(target)
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            value = importlib.import_module(target)
        except ImportError as error:
            raise click.UsageError(f"cannot import {target!r}: {error}") from None
    found = _classes_of(value)
    if not found:
        raise click.UsageError(f"{target!r} names no @workflow.defn class")
    return found


def _classes_of(value: Any) -> List[type]:
    if isinstance(value, types.ModuleType):
        return [obj for _, obj in inspect.getmembers(value, inspect.isclass)
                if _is_workflow(obj) and obj.__module__ == value.__name__]
    if _is_workflow(value):
        return [value]
    workflows = getattr(value, "workflows", None)  # a Worker
    if workflows is not None and hasattr(workflows, "classes"):
        return [cls for cls in workflows.classes if _is_workflow(cls)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [cls for cls in value if _is_workflow(cls)]
    return []


def _is_workflow(obj: Any) -> bool:
    return isinstance(obj, type) and isinstance(getattr(obj, "__workflow_name__", None), str)


@click.command("replay")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("-f", "--history", "history_paths", multiple=True, type=click.Path(exists=True),
              help="A history JSON file, or a folder of them (repeatable).")
@click.option("--workflow-id", "workflow_ids", multiple=True, help="Fetch this workflow's history (repeatable).")
@click.option("--run-id", default=None, help="With a single --workflow-id: this run instead of the current one.")
@click.option("--query", default=None, help="Fetch every listed workflow whose id or business key contains this.")
@click.option("--workflow-type", default=None, help="Fetch every listed workflow of this type.")
@click.option("--status", default=None, type=click.Choice(["running", "completed", "failed"]),
              help="Only listed workflows in this state (with --query / --workflow-type).")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="At most this many listed workflows.")
@server_url_option(short=True, help=f"Server to fetch histories from (env {SERVER_URL_ENV}; default "
                                    f"{DEFAULT_SERVER}); --server and -s are aliases.")
@token_option()
@namespace_option()
@click.option("--external-storage", default=None, envvar="SYNC_WORKER_EXTERNAL_STORAGE",
              help="Where payloads recorded as references are (file:///dir, a directory or s3://bucket/prefix; "
                   "env SYNC_WORKER_EXTERNAL_STORAGE).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def replay_command(targets: Tuple[str, ...], history_paths: Tuple[str, ...], workflow_ids: Tuple[str, ...],
                   run_id: Optional[str], query: Optional[str], workflow_type: Optional[str], status: Optional[str],
                   limit: Optional[int], server_url: Optional[str], token: Optional[str], namespace: Optional[str],
                   external_storage: Optional[str], as_json: bool) -> None:
    """Replay recorded histories against the current workflow code; non-zero exit on non-determinism."""
    from ..workflow.replay_check import Replayer

    classes: List[type] = []
    for target in targets:
        classes.extend(cls for cls in workflow_classes(target) if cls not in classes)
    driver = None
    if external_storage:
        from ..host import values

        try:
            driver = values.external_storage(external_storage, True)
        except values.Invalid as error:
            raise click.UsageError(f"--external-storage {error}") from None
    try:
        replayer = Replayer(workflows=classes, external_storage=driver)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    from_server = bool(workflow_ids or query or workflow_type or status)
    if run_id is not None and len(workflow_ids) != 1:
        raise click.UsageError("--run-id goes with exactly one --workflow-id")
    if not history_paths and not from_server:
        raise click.UsageError("give histories: -f FILE_OR_FOLDER, --workflow-id, --query or --workflow-type")
    connection: Optional[ClientOptions] = None
    if from_server:
        try:
            connection = ClientOptions.from_env(server_url=server_url, token=token, namespace=namespace)
        except OptionsError as error:
            raise click.UsageError(str(error)) from None
    histories = _histories(history_paths, connection, workflow_ids, run_id, query, workflow_type, status, limit)
    report = replayer.check_all(histories)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        for check in report.checks:
            click.echo(check.describe())
        click.echo(report.summary())
    if not report.checks:
        click.echo("no histories were found", err=True)
        sys.exit(EXIT_INVALID)
    if report.ok:
        sys.exit(EXIT_OK)
    if report.checks and all(_unreachable(check.error) for check in report.failed) and not report.nondeterministic \
            and not report.replayed:
        sys.exit(EXIT_NETWORK)
    sys.exit(EXIT_FAILURE)


def _histories(paths: Tuple[str, ...], connection: Optional[ClientOptions], workflow_ids: Tuple[str, ...],
               run_id: Optional[str], query: Optional[str], workflow_type: Optional[str], status: Optional[str],
               limit: Optional[int]) -> Iterator[Any]:
    from ..testing.replay import fetch_histories, load_history_files

    yield from load_history_files(paths)
    if connection is None:
        return
    if connection.server_url is None:
        connection = connection.replace(server_url=DEFAULT_SERVER)
    client = connection.build_client(transport_retries=2)
    try:
        yield from fetch_histories(client, workflow_ids=workflow_ids, run_id=run_id, query=query,
                                   workflow_type=workflow_type, status=status, limit=limit)
    except Exception as error:  # the listing itself failed (unreachable server, refused filter)
        yield f"server {client.base_url}", error
    finally:
        client.close()


def _unreachable(error: Optional[BaseException]) -> bool:
    from ..errors import TransportError

    return isinstance(error, (TransportError, ConnectionError))

"""Replay checks: the SDK's ``replay_history`` / ``replay_history_file``, and histories for a ``Replayer``.

``replay_history(cls, events, start_input)`` hands a recorded history to the replayer the worker
uses and raises what the worker would (``NonDeterministicReplayError`` when the code no longer
matches). For many histories at once, :class:`~sync_worker.workflow.Replayer`'s ``check_all``
reports each one; :func:`load_history_files` and :func:`fetch_histories` feed it from JSON files
(a list of events, ``{"events": [...]}`` or a history export bundle) or from a server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

from ..workflow import ReplayResult, replay
from ..workflow.replay_check import History, history_events

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client

__all__ = ["fetch_histories", "load_history_file", "load_history_files", "replay_history", "replay_history_file"]

PathLike = Union[str, Path]


def replay_history(workflow_cls: type, history_events_: Iterable[Dict[str, Any]],
                   start_input: Optional[List[Any]] = None, *, run_id: str = "",
                   payload_codec: Optional[str] = None) -> ReplayResult:
    """Replay a recorded history against the current ``workflow_cls``; raises on non-determinism.

    Dump a production history (``client.get_history`` / ``export_history``), keep it as JSON
    with the tests and replay it on every change: this is how a deploy proves new code still
    replays the runs in flight. ``payload_codec`` names the codec of bare payload blobs (Avro).
    """
    return replay(workflow_cls, list(history_events_), list(start_input or []), run_id=run_id,
                  payload_codec=payload_codec if payload_codec is not None else "avro")


def replay_history_file(workflow_cls: type, path: PathLike, start_input: Optional[List[Any]] = None, *,
                        run_id: str = "", payload_codec: Optional[str] = None) -> ReplayResult:
    """:func:`replay_history` of a JSON file: a list of events, or an object with an ``events`` list."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    events = data["events"] if isinstance(data, dict) else data
    return replay_history(workflow_cls, events, start_input, run_id=run_id, payload_codec=payload_codec)


def load_history_file(path: PathLike) -> History:
    """One JSON history file as stored: an event list, ``{"events": ...}`` or an export bundle."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, (list, dict)):
        raise ValueError(f"{path}: a history is a JSON list of events or an object holding one")
    return data


def load_history_files(paths: Iterable[PathLike]) -> Iterator[Tuple[str, Any]]:
    """``(path, history)`` for each file, and each ``*.json`` of a directory (sorted); unreadable ones too.

    A file that cannot be read or parsed yields ``(path, exception)``, so one bad file is a
    failed check in the report rather than the end of the run.
    """
    for raw in paths:
        path = Path(raw)
        files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        for file in files:
            try:
                yield str(file), load_history_file(file)
            except (OSError, ValueError) as error:
                yield str(file), error


def fetch_histories(client: Client, *, workflow_ids: Iterable[str] = (), run_id: Optional[str] = None,
                    query: Optional[str] = None, workflow_type: Optional[str] = None, status: Optional[str] = None,
                    limit: Optional[int] = None) -> Iterator[Tuple[str, Any]]:
    """``(source, history)`` of runs on a server: the named workflows, and those a list query finds.

    ``query`` / ``workflow_type`` / ``status`` are the server's workflow-list filters (the
    server's ``query`` matches workflow ids and business keys); ``limit`` caps how many listed
    runs are fetched. Each history is the run's full event list (every page).
    """
    seen: Set[Tuple[str, str]] = set()
    for workflow_id in workflow_ids:
        yield from _fetch(client, workflow_id, run_id, seen)
    if query is None and workflow_type is None and status is None:
        return
    token: Optional[str] = None
    fetched = 0
    while True:
        page = client.list_workflows(workflow_type=workflow_type, status=status, query=query, next_page_token=token)
        for execution in page.executions:
            if limit is not None and fetched >= limit:
                return
            fetched += 1
            yield from _fetch(client, execution.workflow_id, execution.run_id, seen)
        token = page.next_page_token
        if not token:
            return


def _fetch(client: Client, workflow_id: str, run_id: Optional[str],
           seen: Set[Tuple[str, str]]) -> Iterator[Tuple[str, Any]]:
    source = f"{workflow_id}/{run_id}" if run_id else workflow_id
    try:
        if run_id is None:
            run_id = client.describe_workflow(workflow_id).run_id
        if run_id is None:
            raise ValueError(f"workflow {workflow_id} has no run")
        if (workflow_id, run_id) in seen:
            return
        seen.add((workflow_id, run_id))
        events = list(client.iter_history(workflow_id, run_id))
    except Exception as error:  # not found, unreachable: a failed check, not the end of the run
        yield source, error
        return
    yield f"{workflow_id}/{run_id}", {"events": history_events(events), "workflow_id": workflow_id,
                                      "run_id": run_id}

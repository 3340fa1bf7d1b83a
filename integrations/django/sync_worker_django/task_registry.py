"""The ``django.tasks`` tasks of this process that the durable backend serves, as activities.

:class:`~sync_worker_django.tasks.DurableWorkflowBackend` records every task defined for it
(the framework validates each task with its backend when the ``@task`` decorator runs), so
after autodiscovery imported the apps' ``tasks`` modules this registry knows them all.
Each task runs as a standalone durable activity whose type is the task's ``module_path``
and whose input is ``[args, kwargs]``; :func:`activities_for_queue` turns the tasks of one
queue into activity functions for that queue's worker.

This module never imports the tasks framework itself (``django.tasks`` on Django 6, the
``django_tasks`` backport before): it works from the task objects it is given.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any, Callable, Dict, List, Tuple

from sync_worker import activity

__all__ = ["activities_for_queue", "activity_type_for", "framework_of", "register_task", "registered_tasks",
           "tasks_for_queue"]

_lock = threading.Lock()
#: (module_path, queue_name) -> task: ``task.using(queue_name=...)`` copies serve their own queue.
_tasks: Dict[Tuple[str, str], Any] = {}


def activity_type_for(task: Any) -> str:
    """The activity type a task runs as: its dotted ``module_path``."""
    return str(task.module_path)


def framework_of(task: Any) -> ModuleType:
    """The tasks framework a task belongs to (``django.tasks`` or the ``django_tasks`` backport)."""
    owner = type(task).__module__
    return importlib.import_module("django_tasks" if owner.startswith("django_tasks") else "django.tasks")


def register_task(task: Any) -> None:
    """Remember ``task`` for its queue (the first definition per module path and queue is kept)."""
    with _lock:
        _tasks.setdefault((activity_type_for(task), str(task.queue_name)), task)


def registered_tasks() -> Dict[str, Any]:
    """``module_path -> task`` (one per path, for reading results)."""
    with _lock:
        found: Dict[str, Any] = {}
        for (path, _queue), task in _tasks.items():
            found.setdefault(path, task)
        return found


def tasks_for_queue(queue: str) -> List[Any]:
    with _lock:
        return [task for (_path, task_queue), task in _tasks.items() if task_queue == queue]


def _normalized(framework: ModuleType, value: Any) -> Any:
    utils = importlib.import_module(framework.__name__ + ".utils") if framework.__name__ == "django_tasks" else None
    normalize = getattr(utils, "normalize_json", None) if utils is not None else None
    if normalize is None:  # Django 6 keeps it in django.utils.json
        try:
            normalize = importlib.import_module("django.utils.json").normalize_json
        except (ImportError, AttributeError):
            return value
    return normalize(value)


def _context_for(task: Any, framework: ModuleType, args: List[Any], kwargs: Dict[str, Any]) -> Any:
    info = activity.context().info
    task_result = framework.TaskResult(
        task=task, id=info.workflow_id or info.task_id, status=framework.TaskResultStatus.RUNNING,
        enqueued_at=None, started_at=None, finished_at=None, last_attempted_at=None,
        args=args, kwargs=kwargs, backend=task.backend, errors=[],
        worker_ids=[info.worker_id] * max(1, info.attempt_number),
    )
    return framework.TaskContext(task_result=task_result)


def _activity_for(task: Any) -> Callable[..., Any]:
    def run_task(args: Any = None, kwargs: Any = None) -> Any:
        positional = list(args or [])
        keywords = dict(kwargs or {})
        framework = framework_of(task)
        if task.takes_context:
            value = task.call(_context_for(task, framework, positional, keywords), *positional, **keywords)
        else:
            value = task.call(*positional, **keywords)
        return _normalized(framework, value)

    run_task.__qualname__ = f"django_task[{activity_type_for(task)}]"
    return activity.defn(name=activity_type_for(task))(run_task)


def activities_for_queue(queue: str) -> List[Callable[..., Any]]:
    """Activity functions for every registered task whose ``queue_name`` is ``queue``."""
    return [_activity_for(task) for task in tasks_for_queue(queue)]

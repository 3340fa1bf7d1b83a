"""Autodiscovery: import ``workflows``/``activities``/``tasks`` of every installed app.

Called when a worker starts (the management command, :func:`~sync_worker_django.workers.build_workers`),
never from ``AppConfig.ready()``: web processes do not pay for it and the autoreloader does
not import user code twice.

A module that an app does not have is skipped; an ``ImportError`` *inside* a module that
exists is raised, so a broken import is never mistaken for "no activities here". Workflow
classes (``@workflow.defn``) and activity functions (``@activity.defn``) defined in a
discovered module (or a submodule of it) are collected; the same type name defined by two
different objects is refused with :class:`DuplicateTypeName`, naming both modules.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from sync_worker.errors import DuplicateRegistrationError

__all__ = ["Discovered", "DuplicateTypeName", "autodiscover", "collect_from_modules"]

logger = logging.getLogger("sync_worker.django.discovery")


class DuplicateTypeName(DuplicateRegistrationError):
    """Two different workflow classes or activity functions claim one type name."""

    def __init__(self, kind: str, name: str, first_module: str, second_module: str) -> None:
        super(DuplicateRegistrationError, self).__init__(
            f"{kind} type {name!r} is defined twice: in {first_module} and in {second_module}; "
            f"type names must be unique across INSTALLED_APPS (rename one with {kind}.defn(name=...))",
        )
        self.kind = kind
        self.name = name
        self.modules = (first_module, second_module)


@dataclass
class Discovered:
    """What autodiscovery found: ``type name -> (object, module name)``."""

    workflows: Dict[str, Tuple[Any, str]] = field(default_factory=dict)
    activities: Dict[str, Tuple[Callable[..., Any], str]] = field(default_factory=dict)
    modules: List[str] = field(default_factory=list)

    def workflow_classes(self) -> List[Any]:
        return [cls for cls, _ in self.workflows.values()]

    def activity_functions(self) -> List[Callable[..., Any]]:
        return [fn for fn, _ in self.activities.values()]


def _defined_in(obj: Any, module: ModuleType) -> bool:
    owner = getattr(obj, "__module__", None)
    return isinstance(owner, str) and (owner == module.__name__ or owner.startswith(module.__name__ + "."))


def _add(table: Dict[str, Tuple[Any, str]], kind: str, name: str, obj: Any, module: str) -> None:
    known = table.get(name)
    if known is None:
        table[name] = (obj, module)
    elif known[0] is not obj:
        raise DuplicateTypeName(kind, name, known[1], module)


def _scan(module: ModuleType, found: Discovered) -> None:
    for value in list(vars(module).values()):
        if not _defined_in(value, module):
            continue
        owner = str(value.__module__)
        workflow_name = getattr(value, "__workflow_name__", None)
        activity_name = getattr(value, "__activity_name__", None)
        if isinstance(value, type) and isinstance(workflow_name, str):
            _add(found.workflows, "workflow", workflow_name, value, owner)
        elif callable(value) and isinstance(activity_name, str):
            _add(found.activities, "activity", activity_name, value, owner)


def collect_from_modules(modules: Iterable[ModuleType], found: Optional[Discovered] = None) -> Discovered:
    """Collect the workflow and activity definitions of already imported modules."""
    found = found if found is not None else Discovered()
    for module in modules:
        found.modules.append(module.__name__)
        _scan(module, found)
    return found


def _import_if_present(app_module: ModuleType, app_name: str, submodule: str) -> Optional[ModuleType]:
    from django.utils.module_loading import module_has_submodule

    if not module_has_submodule(app_module, submodule):
        return None
    return importlib.import_module(f"{app_name}.{submodule}")


_OWN_APP = "sync_worker_django"


def autodiscover(module_names: Sequence[str] = ("workflows", "activities", "tasks")) -> Discovered:
    """Import ``module_names`` of every installed app (in ``INSTALLED_APPS`` order) and collect them.

    Django must be set up (``django.setup()``). Importing a ``tasks`` module also registers
    its ``django.tasks`` tasks with :class:`~sync_worker_django.tasks.DurableWorkflowBackend`.
    """
    from django.apps import apps

    imported: List[ModuleType] = []
    for config in apps.get_app_configs():
        if config.name == _OWN_APP:
            continue  # its ``tasks`` is the django.tasks backend (needs the framework), not user code
        for submodule in module_names:
            module = _import_if_present(config.module, config.name, submodule)
            if module is not None:
                imported.append(module)
    found = collect_from_modules(imported)
    logger.info("autodiscovery: %d workflow type(s), %d activity type(s) from %s",
                len(found.workflows), len(found.activities), ", ".join(found.modules) or "no module")
    return found

"""``WorkflowRegistry``: workflow type name -> class, for one worker."""

from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Optional

from ..errors import DuplicateRegistrationError, InvalidWorkflowDefinition
from .definition import handler_registries, validate_entrypoint

__all__ = ["WorkflowRegistry"]


class WorkflowRegistry:
    """The workflow classes a worker serves, keyed by their ``@workflow.defn`` name.

    Registering two classes under one name raises ``DuplicateRegistrationError``
    (re-registering the same class is a no-op); an undecorated class or an
    ``async def run`` raises ``InvalidWorkflowDefinition``.
    """

    def __init__(self, workflows: Iterable[type] = ()) -> None:
        self._by_name: Dict[str, type] = {}
        for cls in workflows:
            self.register(cls)

    def register(self, cls: type) -> type:
        name = getattr(cls, "__workflow_name__", None)
        if not isinstance(cls, type) or not isinstance(name, str) or not name:
            raise InvalidWorkflowDefinition(
                f"{cls!r} is not a workflow class; decorate it with @workflow.defn(name=...)")
        validate_entrypoint(cls)
        handler_registries(cls)  # re-checks handlers (a subclass may have added some)
        existing = self._by_name.get(name)
        if existing is not None and existing is not cls:
            raise DuplicateRegistrationError("workflow", name, existing, cls)
        self._by_name[name] = cls
        return cls

    def get(self, name: str) -> Optional[type]:
        return self._by_name.get(name)

    def names(self) -> List[str]:
        return list(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[type]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

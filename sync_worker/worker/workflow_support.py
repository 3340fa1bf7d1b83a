"""The worker's view of its workflow classes: names, fingerprints, contracts, registry.

The workflow package owns all of these; this adapter only gathers them for the
registration body and hands the registry to the workflow-task executor.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable, Dict, List, Optional

__all__ = ["WorkflowSet"]

logger = logging.getLogger("sync_worker.worker")


def _workflow_attr(name: str) -> Optional[Callable[..., Any]]:
    for module_name in ("sync_worker.workflow", "sync_worker.workflow.registry",
                        "sync_worker.workflow.fingerprint", "sync_worker.workflow.contracts"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        value = getattr(module, name, None)
        if callable(value):
            return value  # type: ignore[no-any-return]
    return None


def _type_name(cls: Any) -> str:
    return str(getattr(cls, "__workflow_name__", getattr(cls, "__name__", repr(cls))))


class WorkflowSet:
    """The workflow classes one worker serves."""

    def __init__(self, classes: List[Any]) -> None:
        self.classes = list(classes)
        self._registry: Any = None
        seen: Dict[str, Any] = {}
        for cls in self.classes:
            name = _type_name(cls)
            if name in seen and seen[name] is not cls:
                from ..errors import DuplicateRegistrationError

                raise DuplicateRegistrationError("workflow", name)
            seen[name] = cls

    def __len__(self) -> int:
        return len(self.classes)

    def __bool__(self) -> bool:
        return bool(self.classes)

    def names(self) -> List[str]:
        return [_type_name(cls) for cls in self.classes]

    def fingerprints(self) -> Dict[str, str]:
        fingerprint = _workflow_attr("workflow_definition_fingerprint")
        if fingerprint is None:
            if self.classes:
                logger.warning("workflow fingerprints unavailable: the workflow package does not provide them")
            return {}
        return {_type_name(cls): str(fingerprint(cls)) for cls in self.classes}

    def command_contracts(self) -> Dict[str, Any]:
        contract = _workflow_attr("workflow_command_contract")
        if contract is None:
            return {}
        return {_type_name(cls): contract(cls) for cls in self.classes}

    @staticmethod
    def has_validators(contracts: Dict[str, Any]) -> bool:
        """Whether any workflow declares an update validator (its contract's ``update_validators``)."""
        return any(isinstance(c, dict) and c.get("update_validators") for c in contracts.values())

    @staticmethod
    def has_updates(contracts: Dict[str, Any]) -> bool:
        """Whether any workflow declares update handlers (from its command contract)."""
        return any(isinstance(c, dict) and c.get("updates") for c in contracts.values())

    def registry(self) -> Any:
        """The ``WorkflowRegistry`` of these classes (built once)."""
        if self._registry is None:
            module = importlib.import_module("sync_worker.workflow.registry")
            self._registry = module.WorkflowRegistry(self.classes)
        return self._registry

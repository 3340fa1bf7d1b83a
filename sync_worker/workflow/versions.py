"""Version markers in replay: ``ctx.get_version`` / ``patched`` / ``deprecate_patch`` (§4.5.1).

A new run records the newest version; a replay reads the recorded one back (validated strictly)
and a run that passed the change point without a marker takes the old path (-1). Older SDKs
recorded a marker on every call of the same change id: the duplicates are consumed.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import NonDeterministicReplayError
from .commands import Command, RecordVersionMarker
from .history import HistoryIndex, RecordedStep
from .matching import check_step

__all__ = ["VersionMarkers"]


class VersionMarkers:
    """The version-marker part of the replay driver (mixed into ``replayer._Replay``)."""

    history: HistoryIndex
    cursor: int
    pending: List[Command]
    versions: Dict[str, int]

    def next_unconsumed(self) -> Optional[RecordedStep]:
        raise NotImplementedError

    def go_live(self) -> None:
        raise NotImplementedError

    def at_step(self, step: Optional[RecordedStep], last: Optional[int] = None) -> None:
        raise NotImplementedError

    def recorded_version(self, step: RecordedStep) -> int:
        payload = self.history.payload_at(step.history_index)
        version, change_id = payload.get("version"), payload.get("change_id")
        low, high = payload.get("min_supported"), payload.get("max_supported")

        def invalid(detail: str) -> NonDeterministicReplayError:
            return NonDeterministicReplayError(step.sequence, "compatible version marker", step.event_types,
                                               detail=detail)

        if type(version) is not int:
            raise invalid("Version marker must contain an integer version.")
        if not isinstance(change_id, str) or not change_id.strip():
            raise invalid("Version marker must retain a non-empty change ID.")
        if type(low) is not int or type(high) is not int or not low <= version <= high:
            raise invalid("Recorded version marker has an invalid supported range.")
        return version

    def skip_duplicate_version_markers(self) -> None:
        # Older SDKs recorded a marker on every call of the same change id: consume them.
        while self.versions and self.cursor < len(self.history.results):
            step = self.history.result_steps[self.cursor]
            change_id = step.details.get("change_id")
            if step.shape != "version marker" or change_id not in self.versions or self.next_unconsumed() is not step:
                return
            if self.recorded_version(step) != self.versions[change_id]:
                raise NonDeterministicReplayError(step.sequence, "compatible version marker", step.event_types,
                                                  detail=f"Conflicting recorded decisions for change ID {change_id!r}.")
            self.cursor += 1

    def resolve_version(self, command: RecordVersionMarker) -> Any:
        def invalid(detail: str, step: Optional[RecordedStep] = None) -> NonDeterministicReplayError:
            return NonDeterministicReplayError(step.sequence if step else self.history.max_sequence() + 1,
                                               "compatible version marker", step.event_types if step else [],
                                               detail=detail)

        if not isinstance(command.change_id, str) or not command.change_id.strip():
            raise invalid("Version markers require a stable non-empty change ID.")
        if command.min_supported > command.max_supported:
            raise invalid(f"Invalid supported range for change ID {command.change_id!r}.")
        step = self.next_unconsumed()
        if command.change_id in self.versions:
            version = self.versions[command.change_id]
        elif step is not None and step.shape == "version marker":
            if self.history.result_steps[self.cursor] is not step:
                raise NonDeterministicReplayError(step.sequence, command.describe(), step.event_types)
            self.at_step(step)
            check_step(command, step)
            version = self.recorded_version(step)
            self.cursor += 1
        elif step is not None or self.history.has_terminal_event:
            # The run already passed this point without a marker: it took the old path.
            version = -1
        else:
            version = command.version
            self.go_live()
            self.at_step(None)
            self.pending.append(command)
        if not command.min_supported <= version <= command.max_supported:
            raise invalid(f"Recorded version {version} for change ID {command.change_id!r} is outside the "
                          f"supported range {command.min_supported}..{command.max_supported}.", step)
        self.versions.setdefault(command.change_id, version)
        return command.result_for(version)

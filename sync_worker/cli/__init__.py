"""The ``sync-worker`` command line (click).

Sub-commands live beside the code they drive and are attached here lazily, so that
``sync-worker --help`` stays fast and a missing optional dependency only affects the
command that needs it.
"""

from __future__ import annotations

import importlib
from typing import Any, List, Optional

import click

from .. import __version__

# name -> "module:attribute" of a click.Command
_COMMANDS = {
    "devserver": "sync_worker.devserver.cli:devserver_command",
    "nestjs": "sync_worker.nestjs.cli:nestjs_command",
    "run": "sync_worker.worker.cli:run_command",
    "replay": "sync_worker.cli.replay:replay_command",
    "workflow": "sync_worker.cli.workflow:workflow_group",
    "schedule": "sync_worker.cli.schedule:schedule_group",
    "namespace": "sync_worker.cli.namespace:namespace_group",
    "activity": "sync_worker.cli.activity:activity_group",
    "task-queue": "sync_worker.cli.task_queue:task_queue_group",
    "worker": "sync_worker.cli.worker_records:worker_group",
    "search-attribute": "sync_worker.cli.operator:search_attribute_group",
    "storage": "sync_worker.cli.operator:storage_group",
    "system": "sync_worker.cli.operator:system_group",
    "bridge": "sync_worker.cli.operator:bridge_group",
    "celery": "sync_worker_celery.cli:celery_command",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(super().list_commands(ctx)) | set(_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        command: Any = getattr(module, attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - programming error
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="sync-worker")
def main() -> None:
    """sync-worker: a blocking-API worker for the Durable Workflow server."""


if __name__ == "__main__":  # pragma: no cover
    main()

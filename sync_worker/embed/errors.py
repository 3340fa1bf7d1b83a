"""Errors of the embedding layer (all are :class:`~sync_worker.errors.DurableWorkflowError`)."""

from __future__ import annotations

from ..errors import DurableWorkflowError

__all__ = ["EmbedConfigError", "EmbedError", "ForkedHandleError"]


class EmbedError(DurableWorkflowError):
    """Base class of the embedding errors."""


class EmbedConfigError(EmbedError, ValueError):
    """The embedding is misconfigured (factory, pool, server URL, uWSGI threads, ...)."""


class ForkedHandleError(EmbedError, RuntimeError):
    """A handle started in one process was used in a forked child (threads do not survive a fork)."""

    def __init__(self, started_pid: int, current_pid: int) -> None:
        super().__init__(
            f"these embedded workers were started in process {started_pid}, not in this process ({current_pid}): "
            "threads and HTTP pools do not survive a fork. Start the workers after the fork (the gunicorn "
            "post_worker_init / uWSGI postfork hooks do), or call handle.ensure_running() in the child"
        )
        self.started_pid = started_pid
        self.current_pid = current_pid

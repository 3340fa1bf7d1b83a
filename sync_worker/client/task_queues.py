"""Task queues: visibility (list, describe) and build-id rollout (list, drain, promote, resume)."""

from __future__ import annotations

from typing import Optional

from .base import ClientBase, segment
from .results import TaskQueueBuildIdRollout, TaskQueueBuildIdRolloutState, TaskQueueDescription, TaskQueueList
from .transport import RetryMode


class TaskQueuesMixin(ClientBase):
    """Task-queue routes, with ``durable_workflow`` 2.12's signatures."""

    def list_task_queues(self) -> TaskQueueList:
        """The namespace's task queues with their admission state."""
        return TaskQueueList.from_dict(self._call("control", "GET", "/task-queues", route="/task-queues",
                                                  operation="task_queue.list"))

    def describe_task_queue(self, name: str) -> TaskQueueDescription:
        """Backlog, pollers, leases and admission of one queue."""
        return TaskQueueDescription.from_dict(self._call(
            "control", "GET", f"/task-queues/{segment(name)}", route="/task-queues/{name}",
            operation="task_queue.describe"))

    def list_task_queue_build_ids(self, task_queue: str) -> TaskQueueBuildIdRollout:
        """The build-id cohorts of a queue (unversioned workers under ``build_id=None``)."""
        return TaskQueueBuildIdRollout.from_dict(self._call(
            "control", "GET", f"/task-queues/{segment(task_queue)}/build-ids", route="/task-queues/{name}/build-ids",
            operation="task_queue.build_ids"))

    def drain_task_queue_build_id(self, task_queue: str, build_id: Optional[str]) -> TaskQueueBuildIdRolloutState:
        """Stop a build's workers claiming new tasks (in-flight work finishes)."""
        return self._rollout(task_queue, build_id, "drain")

    def promote_task_queue_build_id(self, task_queue: str, build_id: Optional[str]) -> TaskQueueBuildIdRolloutState:
        """Select a build for new workflow starts on the queue."""
        return self._rollout(task_queue, build_id, "promote")

    def resume_task_queue_build_id(self, task_queue: str, build_id: Optional[str]) -> TaskQueueBuildIdRolloutState:
        """Undo a drain."""
        return self._rollout(task_queue, build_id, "resume")

    def _rollout(self, task_queue: str, build_id: Optional[str], action: str) -> TaskQueueBuildIdRolloutState:
        return TaskQueueBuildIdRolloutState.from_dict(self._call(
            "control", "POST", f"/task-queues/{segment(task_queue)}/build-ids/{action}",
            route=f"/task-queues/{{name}}/build-ids/{action}", body={"build_id": build_id},
            retry=RetryMode.CONNECT_ONLY, operation=f"task_queue.build_id.{action}"))

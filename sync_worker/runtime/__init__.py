"""The runtime shell and its building blocks, shared by every task source.

One concurrency backend (threads or gevent greenlets), slot pools behind the memory admission
gate, the in-flight set, the status board, poll back-off and metrics names, and
:class:`~sync_worker.runtime.shell.RuntimeShell`: stop-once, drain to a deadline, cold kill and
supervision over a :class:`~sync_worker.runtime.shell.TaskSource`. The Durable Workflow worker
(``sync_worker.worker``) and the nestjs-durable step worker (``sync_worker.nestjs``) are sources
on it. See docs/runtime.md.
"""

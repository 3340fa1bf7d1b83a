"""gunicorn config of bench/embed_latency.py: the hooks only when SYNC_WORKER_FACTORY is set."""

import os

if os.environ.get("SYNC_WORKER_FACTORY"):
    from sync_worker.embed.gunicorn import post_worker_init, worker_exit  # noqa: F401

control_socket_disable = True
graceful_timeout = 10

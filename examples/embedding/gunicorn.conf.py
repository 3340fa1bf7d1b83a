"""gunicorn -c gunicorn.conf.py shop:application  (from this folder; see docs/embedding.md)."""

from sync_worker.embed.gunicorn import post_worker_init, worker_abort, worker_exit, worker_int  # noqa: F401

SYNC_WORKER_FACTORY = "shop:build"  # or the SYNC_WORKER_FACTORY environment variable
SYNC_WORKER_CONCURRENCY = 4         # activity slots per web worker

workers = 2
worker_class = "gthread"            # sync, gthread or gevent (greenlets chosen automatically)
threads = 4
graceful_timeout = 30               # the embedded workers drain within this (minus a second)
bind = "127.0.0.1:8000"

"""uWSGI module of bench/embed_latency.py: the embedding only when SYNC_WORKER_FACTORY is set."""

import os

if os.environ.get("SYNC_WORKER_FACTORY"):
    from sync_worker.embed import uwsgi as embedded

    embedded.setup()

from bench.embed_app import application

__all__ = ["application"]

"""uWSGI entry point of the test project: the embedding wired, then Django behind the middleware."""

import os

from sync_worker.embed import uwsgi as embedded

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "embedsite.settings")
embedded.setup("sync_worker_django.workers:build_workers")

from embedsite.wsgi import application  # noqa: E402

__all__ = ["application"]

"""The WSGI module the uWSGI tests load: the embedding wired exactly as a user wires it."""

import logging

from sync_worker.embed import uwsgi as embedded

# uWSGI configures no Python logging: show the library's lines in the server log.
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")

embedded.setup()  # the factory comes from SYNC_WORKER_FACTORY

from tests.integrations.embed.worker_app import application  # noqa: E402

__all__ = ["application"]

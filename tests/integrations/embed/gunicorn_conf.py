"""gunicorn config of the embedding tests: the hooks exactly as a user imports them."""

import logging
import os

from sync_worker.embed.gunicorn import post_worker_init, worker_abort, worker_exit, worker_int  # noqa: F401

# The variable of the same name in the config file (the tests pass it through the environment
# EMBED_CONFIG_FACTORY to prove this path; SYNC_WORKER_FACTORY itself would also work).
SYNC_WORKER_FACTORY = os.environ.get("EMBED_CONFIG_FACTORY") or None

bind = "127.0.0.1:0"
graceful_timeout = int(os.environ.get("EMBED_GRACEFUL_TIMEOUT", "15"))
timeout = 30
loglevel = "info"

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
control_socket_disable = True  # gunicorn 23+: several test servers at once

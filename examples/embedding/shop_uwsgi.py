"""The WSGI module uWSGI loads (module = shop_uwsgi): wire the embedding, then export the app."""

from sync_worker.embed import uwsgi as embedded

embedded.setup("shop:build")

from shop import application  # noqa: E402

__all__ = ["application"]

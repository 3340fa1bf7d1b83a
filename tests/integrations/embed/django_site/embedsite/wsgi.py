"""WSGI entry point: Django wrapped in the embedding's health middleware."""

import os

from django.core.wsgi import get_wsgi_application

from sync_worker.embed import HealthMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "embedsite.settings")
application = HealthMiddleware(get_wsgi_application())

"""Django for the pytest suite, without pytest-django: set up once, migrate a fresh SQLite file."""

import os
import sys

import django

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsite.settings")
django.setup()

from django.core.management import call_command  # noqa: E402

call_command("migrate", verbosity=0)

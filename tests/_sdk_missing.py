"""Why tests that need a dev dependency only installed on Python 3.10+ do not apply where it is missing."""

from __future__ import annotations

import sys

SDK_MISSING = ("the published SDK durable-workflow 2.12 is not installed (it needs Python 3.10+; "
               "pip install -e '.[dev]' installs it there)")

#: The Django test projects (tests/integrations/django_project, examples/django_shop) define
#: django.tasks tasks; on Django 4.2 that is the django-tasks backport, 0.9+ of which needs 3.10+.
DJANGO_TASKS_UNAVAILABLE = sys.version_info < (3, 10)
DJANGO_TASKS_MISSING = ("the Django test projects use the django-tasks backport (0.9+, the django.tasks API), "
                        "which needs Python 3.10+")

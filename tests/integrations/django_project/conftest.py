"""This folder is a real Django project; its suite runs under Django's own test runner.

pytest must not collect it directly (Django is configured per run, by ``manage.py test``):
``tests/integrations/test_django_project.py`` runs that suite as a subprocess, against
SQLite and PostgreSQL.
"""

collect_ignore_glob = ["*"]

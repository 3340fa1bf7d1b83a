#!/usr/bin/env bash
# The Django test project's suite on the newest Django (6.x, built-in django.tasks) on
# Python >= 3.12, against SQLite and PostgreSQL (venv made by scripts/prepare.d/40-django6-venv.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${SYNC_WORKER_DJANGO6_PYTHON:-}" ]; then
  echo "django6 leg: no Django 6 virtualenv (needs Python >= 3.12; see scripts/prepare.d/40-django6-venv.sh)" >&2
  [ -n "${CI:-}" ] && exit 1
  exit 0
fi
export PYTHONPATH="$PWD:$PWD/integrations/django${PYTHONPATH:+:$PYTHONPATH}"
export SW_DJANGO_DATA_DIR=$(mktemp -d)
"$SYNC_WORKER_DJANGO6_PYTHON" -c 'import django, sys; print(f"django6 leg: Django {django.get_version()} on Python {sys.version.split()[0]}")'
cd tests/integrations/django_project
SW_DJANGO_DB=sqlite SW_DJANGO_LEG=dj6 "$SYNC_WORKER_DJANGO6_PYTHON" manage.py test projecttests --noinput
if [ -n "${SYNC_WORKER_TEST_PG_DSN:-}" ]; then
  # the real-process tests (tag "process") ran on SQLite just above, and on PostgreSQL in the main suite
  SW_DJANGO_DB=postgres SW_DJANGO_LEG=dj6 "$SYNC_WORKER_DJANGO6_PYTHON" manage.py test projecttests --noinput \
    --exclude-tag process
else
  echo "django6 leg: PostgreSQL is not running (scripts/services.sh); PostgreSQL half not run" >&2
  [ -n "${CI:-}" ] && exit 1
fi
rm -rf "$SW_DJANGO_DATA_DIR"

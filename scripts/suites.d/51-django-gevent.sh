#!/usr/bin/env bash
# The Django test project's suite in a process patched for gevent before Django loads
# (sync_worker_django.gevent_main, the same entry `durable_worker -P gevent` re-executes):
# workers on greenlets, psycopg 3 on gevent sockets against PostgreSQL, then SQLite.
# The real-process tests (tag "process") already run `-P gevent` in the main suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD:$PWD/integrations/django${PYTHONPATH:+:$PYTHONPATH}"
export SW_DJANGO_DATA_DIR=$(mktemp -d) SYNC_WORKER_POOL=gevent
cd tests/integrations/django_project
if [ -n "${SYNC_WORKER_TEST_PG_DSN:-}" ]; then
  SW_DJANGO_DB=postgres SW_DJANGO_LEG=gevent python3 -m sync_worker_django.gevent_main manage.py test projecttests \
    --noinput --exclude-tag process
else
  echo "django gevent leg: PostgreSQL is not running (scripts/services.sh)" >&2
  [ -n "${CI:-}" ] && exit 1
fi
SW_DJANGO_DB=sqlite SW_DJANGO_LEG=gevent python3 -m sync_worker_django.gevent_main manage.py test projecttests \
  --noinput --exclude-tag process
rm -rf "$SW_DJANGO_DATA_DIR"

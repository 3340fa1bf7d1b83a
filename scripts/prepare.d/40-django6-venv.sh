#!/usr/bin/env bash
# A virtualenv with the newest Django (6.x needs Python >= 3.12) for the Django 6 leg
# (scripts/suites.d/50-django6.sh). The shared environment keeps Django 4.2 LTS with the
# django-tasks backport; this one uses Django's built-in django.tasks. Only third-party
# dependencies are installed: the leg runs the repository's code through PYTHONPATH.
# Prints: export SYNC_WORKER_DJANGO6_PYTHON=<venv python>
set -uo pipefail
VENV=${SYNC_WORKER_DJANGO6_VENV:-/tmp/django-venv}
log() { echo "prepare(django6): $*" >&2; }

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import django, psycopg, gevent, fastavro, tenacity, click, requests; assert django.VERSION >= (6,)' 2>/dev/null; then
  echo "export SYNC_WORKER_DJANGO6_PYTHON=$VENV/bin/python"
  exit 0
fi
base=""
for candidate in "$HOME"/.pyenv/versions/3.1[2-9].*/bin/python python3.13 python3.12; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
    base=$candidate
    break
  fi
done
if [ -z "$base" ]; then
  log "no Python >= 3.12 found (pyenv or python3.12 on PATH): the Django 6 leg will say it cannot run"
  exit 0
fi
log "creating $VENV with $base"
rm -rf "$VENV"
"$base" -m venv "$VENV" >&2 || { log "venv creation failed"; exit 0; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "Django>=6.0,<7" "psycopg[binary]>=3.1" "gevent>=22.10" "requests>=2.28" "urllib3>=1.26" \
    "tenacity>=8.2" "click>=8.0" "fastavro>=1.8" >&2 || { log "pip install failed"; exit 0; }
echo "export SYNC_WORKER_DJANGO6_PYTHON=$VENV/bin/python"

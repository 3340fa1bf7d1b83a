#!/usr/bin/env bash
# A virtualenv with the newest Django (6.x needs Python >= 3.12) for the Django 6 leg
# (scripts/suites.d/50-django6.sh). The shared environment keeps Django 4.2 LTS with the
# django-tasks backport; this one uses Django's built-in django.tasks. Only third-party
# dependencies are installed -- the core's install_requires read from setup.cfg, plus Django 6,
# psycopg 3 and gevent -- and the leg runs the repository's code through PYTHONPATH. The venv
# is refreshed whenever that list changes (a stamp file holds it).
# Prints: export SYNC_WORKER_DJANGO6_PYTHON=<venv python>
set -uo pipefail
cd "$(dirname "$0")/../.."
VENV=${SYNC_WORKER_DJANGO6_VENV:-/tmp/django-venv}
log() { echo "prepare(django6): $*" >&2; }

reqs=$(python3 - <<'PY'
import configparser
config = configparser.ConfigParser()
config.read("setup.cfg")
core = [line.strip() for line in config["options"]["install_requires"].splitlines() if line.strip()]
# sentry-sdk: projecttests/test_sentry_command.py (its local ingest endpoint reads envelopes with it)
print("\n".join(core + ["Django>=6.0,<7", "psycopg[binary]>=3.1", "gevent>=22.10", "sentry-sdk>=2.0"]))
PY
)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.sync-worker-reqs" 2>/dev/null)" = "$reqs" ] \
    && "$VENV/bin/python" -c 'import django; assert django.VERSION >= (6,)' 2>/dev/null; then
  echo "export SYNC_WORKER_DJANGO6_PYTHON=$VENV/bin/python"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
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
  "$base" -m venv "$VENV" >&2 || { log "venv creation failed"; exit 0; }
fi
echo "$reqs" > "$VENV/.sync-worker-reqs.new"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$VENV/.sync-worker-reqs.new" >&2 \
  || { log "pip install failed"; exit 0; }
mv "$VENV/.sync-worker-reqs.new" "$VENV/.sync-worker-reqs"
echo "export SYNC_WORKER_DJANGO6_PYTHON=$VENV/bin/python"

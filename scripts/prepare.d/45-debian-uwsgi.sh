#!/usr/bin/env bash
# Debian's uWSGI 2.0.21 with its python3 plugin, for the embedding test that needs a uWSGI
# where Python threads are off unless --enable-threads is given (the PyPI uWSGI of the dev
# extra is newer and has them on by default). Prints SYNC_WORKER_TEST_DEBIAN_UWSGI.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
log() { echo "debian-uwsgi: $*" >&2; }
bin=/usr/bin/uwsgi_python3
if [ ! -x "$bin" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing uwsgi-core uwsgi-plugin-python3"
    (apt-get install -y -q --no-install-recommends uwsgi-core uwsgi-plugin-python3 \
      || (apt-get update -q && apt-get install -y -q --no-install-recommends uwsgi-core uwsgi-plugin-python3)) \
      >/tmp/sync-worker-debian-uwsgi-apt.log 2>&1 || log "apt-get failed (see /tmp/sync-worker-debian-uwsgi-apt.log)"
  else
    log "not root or no apt-get: the Debian uWSGI test will say it does not apply"
  fi
fi
[ -x "$bin" ] && echo "export SYNC_WORKER_TEST_DEBIAN_UWSGI=$bin"
exit 0

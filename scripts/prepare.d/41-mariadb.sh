#!/usr/bin/env bash
# MariaDB for the nestjs MySQL transport's tests (tests/interop/test_nestjs_mysql.py): Debian's
# mariadb-server (10.11: FOR UPDATE SKIP LOCKED), installed when missing and we are root, then
# started on loopback by scripts/services.sh (which prints SYNC_WORKER_TEST_MYSQL_URL).
set -uo pipefail
cd "$(dirname "$0")/../.."
log() { echo "prepare mariadb: $*" >&2; }

if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing mariadb-server"
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      mariadb-server mariadb-client) >&2 || log "apt-get mariadb-server failed"
  else
    log "mariadb-server missing and not root: the MySQL transport tests will say so"
    exit 0
  fi
fi
bash scripts/services.sh | grep SYNC_WORKER_TEST_MYSQL_URL || log "MariaDB did not start (scripts/services.sh says why)"
exit 0

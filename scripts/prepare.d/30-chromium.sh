#!/usr/bin/env bash
# Chromium and its chromedriver (Debian packages) for the dev server UI's browser tests in
# tests/ui. Selenium drives them with the system driver, so nothing is downloaded at run time.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "prepare: installing chromium and chromium-driver" >&2
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      chromium chromium-driver) >/tmp/sync-worker-chromium-apt.log 2>&1 \
    || echo "prepare: chromium install failed (see /tmp/sync-worker-chromium-apt.log)" >&2
else
  echo "prepare: chromium is not installed and this is not root: tests/ui will say they do not apply" >&2
fi
exit 0

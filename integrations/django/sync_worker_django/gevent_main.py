"""``python -m sync_worker_django.gevent_main manage.py durable_worker ...``: patch first, then Django.

The ``-P gevent`` path of ``manage.py durable_worker`` re-executes itself through this
module (:func:`sync_worker_django.runner.reexec_patched_for_gevent`): gevent's
``monkey.patch_all()`` runs before Django, psycopg, requests or the project's code are
imported, so every socket, lock and thread they create is cooperative.
"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402


def main() -> None:
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv[1:])


if __name__ == "__main__":
    main()

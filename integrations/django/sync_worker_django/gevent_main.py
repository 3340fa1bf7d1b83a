"""``python -m sync_worker_django.gevent_main manage.py <command> ...``: patch first, then Django.

The ``-P gevent`` path of ``manage.py durable_worker`` re-executes itself through this
module (:func:`sync_worker_django.runner.reexec_patched_for_gevent`): gevent's
``monkey.patch_all()`` runs before Django, psycopg, requests or the project's code are
imported, so every socket, lock and thread they create is cooperative. The project's own
``manage.py`` then runs as the main script (so it sets ``DJANGO_SETTINGS_MODULE`` as usual);
with no script, Django's ``execute_from_command_line`` runs the arguments directly.
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0].endswith(".py") and os.path.isfile(argv[0]):
        script = os.path.abspath(argv[0])
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")
        return
    from django.core.management import execute_from_command_line

    execute_from_command_line(["django-admin", *argv])


if __name__ == "__main__":
    main()

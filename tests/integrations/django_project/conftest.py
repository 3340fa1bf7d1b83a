"""This folder is a real Django project; its suites run in their own processes.

pytest must not collect it as part of the main run (Django is configured once per process, by
``manage.py test`` or by ``pytests/conftest.py``): ``tests/integrations/test_django_project.py``
runs the Django suite (``projecttests``) and the pytest suite (``pytests``, with
``SW_DJANGO_PYTEST=1``) as subprocesses.
"""

import os


def pytest_ignore_collect(collection_path, config):
    if os.environ.get("SW_DJANGO_PYTEST") == "1" and "pytests" in collection_path.parts:
        return None
    return True

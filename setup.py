"""Package discovery only (metadata lives in setup.cfg).

The integrations are folders of the repository, installed as their own top-level import
packages by the same ``pip install -e .``: ``integrations/django/sync_worker_django`` and
``integrations/celery/sync_worker_celery``. setup.cfg cannot search several roots, so the
package list is computed here.
"""

from setuptools import find_packages, setup

INTEGRATIONS = {
    "sync_worker_django": "integrations/django",
    "sync_worker_celery": "integrations/celery",
}

packages = find_packages(include=["sync_worker", "sync_worker.*"])
package_dir = {}
for name, root in INTEGRATIONS.items():
    packages += find_packages(root, include=[name, f"{name}.*"])
    package_dir[name] = f"{root}/{name}"

setup(packages=packages, package_dir=package_dir)

"""sync_worker_django: the Django app for sync_worker (settings, autodiscovery, commands, health, tasks)."""

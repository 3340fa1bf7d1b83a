"""sync_worker_celery: a Celery-shaped facade over sync_worker (tasks run as durable activities)."""

"""``path("durable/", include("sync_worker_django.urls"))`` serves ``durable/healthz`` and ``durable/readyz``."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "sync_worker_django"

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]

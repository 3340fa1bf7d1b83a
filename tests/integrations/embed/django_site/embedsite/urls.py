import os

from django.http import HttpResponse
from django.urls import include, path


def hello(request):  # type: ignore[no-untyped-def]
    return HttpResponse(f"hello from django {os.getpid()}\n")


urlpatterns = [
    path("", hello),
    path("durable/", include("sync_worker_django.urls")),
]

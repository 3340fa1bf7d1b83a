from django.urls import include, path

urlpatterns = [
    path("durable/", include("sync_worker_django.urls")),
]

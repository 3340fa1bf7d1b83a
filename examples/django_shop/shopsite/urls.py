from django.urls import include, path
from orders import views

urlpatterns = [
    path("orders/", views.place_order, name="place-order"),
    path("durable/", include("sync_worker_django.urls")),  # durable/healthz, durable/readyz
]

"""POST /orders/?customer=ada&quantity=2: create the row and start its workflow after commit."""

from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from sync_worker_django import start_workflow_on_commit

from .models import Order


@csrf_exempt
@require_POST
def place_order(request):
    with transaction.atomic():
        order = Order.objects.create(customer=request.GET.get("customer", "ada"),
                                     quantity=int(request.GET.get("quantity", "1")))
        # Sent only once this transaction commits: the worker always finds the row.
        order.workflow_id = start_workflow_on_commit("orders.checkout", order.pk, task_queue="orders")
        order.save(update_fields=["workflow_id"])
    return JsonResponse({"order": order.pk, "workflow_id": order.workflow_id}, status=202)

from django.db import models


class Order(models.Model):
    customer = models.CharField(max_length=100)
    sku = models.CharField(max_length=40, default="widget")
    quantity = models.IntegerField(default=1)
    total = models.DecimalField(max_digits=10, decimal_places=2, default=0)
    status = models.CharField(max_length=20, default="new")
    workflow_id = models.CharField(max_length=100, null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)


class Receipt(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="receipts")
    text = models.CharField(max_length=200)
    attempt = models.IntegerField(default=1)

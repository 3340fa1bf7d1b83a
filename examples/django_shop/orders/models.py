from django.db import models


class Order(models.Model):
    customer = models.CharField(max_length=100)
    quantity = models.IntegerField()
    price_cents = models.IntegerField(default=1999)
    status = models.CharField(max_length=20, default="new")
    workflow_id = models.CharField(max_length=100, blank=True, default="")
    receipt = models.CharField(max_length=200, blank=True, default="")

from django.db import models


class StockItem(models.Model):
    sku = models.CharField(max_length=40, unique=True)
    quantity = models.IntegerField(default=0)


class Reservation(models.Model):
    order_id = models.BigIntegerField()
    sku = models.CharField(max_length=40)
    quantity = models.IntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["order_id", "sku"], name="one_reservation_per_order_sku")]

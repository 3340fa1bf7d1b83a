from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("customer", models.CharField(max_length=100)),
                ("sku", models.CharField(default="widget", max_length=40)),
                ("quantity", models.IntegerField(default=1)),
                ("total", models.DecimalField(decimal_places=2, default=0, max_digits=10)),
                ("status", models.CharField(default="new", max_length=20)),
                ("workflow_id", models.CharField(blank=True, max_length=100, null=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name="Receipt",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("text", models.CharField(max_length=200)),
                ("attempt", models.IntegerField(default=1)),
                ("order", models.ForeignKey(on_delete=models.deletion.CASCADE, related_name="receipts",
                                            to="shop.order")),
            ],
        ),
    ]

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
                ("quantity", models.IntegerField()),
                ("price_cents", models.IntegerField(default=1999)),
                ("status", models.CharField(default="new", max_length=20)),
                ("workflow_id", models.CharField(blank=True, default="", max_length=100)),
                ("receipt", models.CharField(blank=True, default="", max_length=200)),
            ],
        ),
    ]

"""A receiver is the address and port a request reaches, learnt by the passes: the hosts as the URLs spelt
them are forgotten, and each webhook's next attempt finds its receiver. The leases taken under the old keys
are left to end (15 s)."""

from urllib.parse import urlsplit

from django.db import migrations, models


def forget(apps, schema_editor):
    apps.get_model("webhooks", "Webhook").objects.update(receiver="")


def spelt(apps, schema_editor):
    """Back to each webhook's `host:port` as its URL spells it, which 0002 kept."""
    Webhook = apps.get_model("webhooks", "Webhook")
    for webhook in Webhook.objects.only("pk", "url"):
        parts = urlsplit(webhook.url)
        host = (parts.hostname or "").rstrip(".")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        receiver = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        Webhook.objects.filter(pk=webhook.pk).update(receiver=receiver)


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0002_deliveries_that_cannot_pile_up"),
    ]

    operations = [
        migrations.AlterField(
            model_name="webhook",
            name="receiver",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        migrations.RunPython(forget, spelt),
    ]

"""A webhook's receiver, backoff and turn; a delivery's answer as a class and a time, never the transport's words;
the receivers' leases."""

from urllib.parse import urlsplit

from django.db import migrations, models

ANSWERS = [
    ("2xx", "2xx"), ("3xx", "3xx"), ("4xx", "4xx"), ("5xx", "5xx"), ("no answer", "no answer"),
    ("not allowed", "not allowed"),
]  # fmt: skip


def receivers(apps, schema_editor):
    """Each webhook's `host:port`, as its URL spells it (a URL checked when it was given)."""
    Webhook = apps.get_model("webhooks", "Webhook")
    for webhook in Webhook.objects.only("pk", "url"):
        parts = urlsplit(webhook.url)
        host = (parts.hostname or "").rstrip(".")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        receiver = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        Webhook.objects.filter(pk=webhook.pk).update(receiver=receiver)


def classes(apps, schema_editor):
    """The last attempt's class from its code, or from the words the log used to keep."""
    Delivery = apps.get_model("webhooks", "Delivery")
    tried = Delivery.objects.filter(attempts__gt=0)
    for low, answer in [(200, "2xx"), (300, "3xx"), (400, "4xx"), (500, "5xx")]:
        tried.filter(response_code__gte=low, response_code__lt=low + 100).update(status_class=answer)
    tried.filter(status_class="", last_error__contains="webhooks may reach").update(status_class="not allowed")
    tried.filter(status_class="").update(status_class="no answer")


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ReceiverLease",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("receiver", models.CharField(max_length=300, unique=True)),
                ("holder", models.UUIDField()),
                ("until", models.DateTimeField()),
            ],
        ),
        migrations.AddField(
            model_name="delivery",
            name="duration_ms",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery",
            name="status_class",
            field=models.CharField(blank=True, choices=ANSWERS, max_length=12),
        ),
        migrations.RunPython(classes, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="delivery",
            name="last_error",
        ),
        migrations.AddField(
            model_name="webhook",
            name="failures",
            field=models.PositiveIntegerField(default=0, help_text="failed attempts in a row"),
        ),
        migrations.AddField(
            model_name="webhook",
            name="last_attempt_at",
            field=models.DateTimeField(blank=True, help_text="the passes serve the oldest first", null=True),
        ),
        migrations.AddField(
            model_name="webhook",
            name="receiver",
            field=models.CharField(default="", max_length=300),
            preserve_default=False,
        ),
        migrations.RunPython(receivers, migrations.RunPython.noop),
        migrations.AddField(
            model_name="webhook",
            name="retry_at",
            field=models.DateTimeField(blank=True, help_text="no delivery of it is tried before", null=True),
        ),
        migrations.AddIndex(
            model_name="webhook",
            index=models.Index(fields=["team", "-last_attempt_at"], name="webhook_served"),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["webhook", "next_attempt_at"],
                name="delivery_due_by_webhook",
            ),
        ),
    ]

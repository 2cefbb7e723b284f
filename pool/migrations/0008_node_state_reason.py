from django.db import migrations, models


def from_history(apps, schema_editor):
    """Each node's reason is its last state change's."""
    Node = apps.get_model("pool", "Node")
    NodeStateChange = apps.get_model("pool", "NodeStateChange")
    for node in Node.objects.all():
        last = NodeStateChange.objects.filter(node=node).order_by("-at", "-id").first()
        if last is not None:
            Node.objects.filter(pk=node.pk).update(state_reason=last.reason)


class Migration(migrations.Migration):
    dependencies = [
        ("pool", "0007_node_scratch_space"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="state_reason",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        migrations.RunPython(from_history, migrations.RunPython.noop),
    ]

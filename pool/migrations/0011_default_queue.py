from django.db import migrations


def make_default_queue(apps, schema_editor):
    Queue = apps.get_model("pool", "Queue")
    if not Queue.objects.filter(is_default=True).exists():
        Queue.objects.create(name="batch", description="where jobs wait unless they name a queue", is_default=True)


class Migration(migrations.Migration):
    dependencies = [("pool", "0010_pool_policy")]

    operations = [migrations.RunPython(make_default_queue, migrations.RunPython.noop)]

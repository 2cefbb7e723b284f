"""On PostgreSQL the database itself refuses to change or delete a record, whatever the code does."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION accounting_record_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'accounting records are append-only';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER accounting_record_append_only
    BEFORE UPDATE OR DELETE ON accounting_record
    FOR EACH ROW EXECUTE FUNCTION accounting_record_append_only();
"""
DROP = """
DROP TRIGGER IF EXISTS accounting_record_append_only ON accounting_record;
DROP FUNCTION IF EXISTS accounting_record_append_only();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("accounting", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]

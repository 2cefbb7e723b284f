"""The database itself keeps the ledger append-only, on SQLite as on PostgreSQL.

- accounting_record: every UPDATE and DELETE is refused (on PostgreSQL since migration 0002; on
  SQLite from here).
- accounting_ledger (both): the row cannot be deleted, and an UPDATE must move it exactly one record
  forward, onto a record that exists with that hash: the ledger row never goes backwards, so records
  cut off the end leave it naming a record that is gone.

Someone with the database's own rights can still drop or bypass a trigger (a superuser's
`session_replication_role = replica` on PostgreSQL, any writer of the file on SQLite): the keyed
hash and the heads file (accounting.chain, accounting.heads) are what notice that.

SQLite drops a table's triggers with the table, and Django's SQLite schema editor alters a table by
copying it to a new one: a later migration altering accounting_record or accounting_ledger on
SQLite must create these triggers again (tests/accounting/test_append_only.py runs every migration
on SQLite and would fail).
"""

from django.db import migrations

REFUSED = "accounting records are append-only"
BACKWARDS = "the accounting ledger only moves forward, one record at a time"
KEPT = "the accounting ledger row cannot be deleted"

# The ledger row may only move to the next sequence, onto the record that has it.
MOVES_FORWARD = """
NEW.last_sequence = OLD.last_sequence + 1
AND EXISTS (SELECT 1 FROM accounting_record WHERE sequence = NEW.last_sequence AND hash = NEW.last_hash)
"""

SQLITE_CREATE = [
    f"""CREATE TRIGGER accounting_record_no_update BEFORE UPDATE ON accounting_record
    BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END""",
    f"""CREATE TRIGGER accounting_record_no_delete BEFORE DELETE ON accounting_record
    BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END""",
    f"""CREATE TRIGGER accounting_ledger_forward_only BEFORE UPDATE ON accounting_ledger
    WHEN NOT ({MOVES_FORWARD})
    BEGIN SELECT RAISE(ABORT, '{BACKWARDS}'); END""",
    f"""CREATE TRIGGER accounting_ledger_no_delete BEFORE DELETE ON accounting_ledger
    BEGIN SELECT RAISE(ABORT, '{KEPT}'); END""",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS accounting_record_no_update",
    "DROP TRIGGER IF EXISTS accounting_record_no_delete",
    "DROP TRIGGER IF EXISTS accounting_ledger_forward_only",
    "DROP TRIGGER IF EXISTS accounting_ledger_no_delete",
]

POSTGRESQL_CREATE = f"""
CREATE OR REPLACE FUNCTION accounting_ledger_forward_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION '{KEPT}';
    END IF;
    IF NOT ({MOVES_FORWARD}) THEN
        RAISE EXCEPTION '{BACKWARDS}';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER accounting_ledger_forward_only
    BEFORE UPDATE OR DELETE ON accounting_ledger
    FOR EACH ROW EXECUTE FUNCTION accounting_ledger_forward_only();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS accounting_ledger_forward_only ON accounting_ledger;
DROP FUNCTION IF EXISTS accounting_ledger_forward_only();
"""


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_CREATE)
    elif vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_DROP)
    elif vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("accounting", "0005_keyed_hash_chain")]
    operations = [migrations.RunPython(forwards, backwards)]

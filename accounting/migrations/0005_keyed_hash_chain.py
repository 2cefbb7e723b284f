"""Records written before the keyed hash are chained again with it.

Until this migration a record's hash was plain SHA-256 over 14 of its columns (the team by its
slug, not cpus, gpus, memory_peak_mb nor its id): anyone able to write to the database could change
those columns, or recompute the hashes. Since, it is HMAC-SHA256 under the ledger key over every
column (accounting.chain). Forwards:

1. The old chain is checked as the old verify_ledger did (sequences 1..n, each prev_hash the hash
   before, each old hash right, the ledger row at the last record). If it does not verify, the
   migration stops and names the record: chaining a changed ledger again would hide the change.
   Investigate (restore the records from a backup), then migrate again.
2. Every record, in sequence order, gets the keyed hash and the new prev_hash, and the ledger row
   the new last hash. The key is the one the code uses (accounting.chain.ledger_key): set
   E31_LEDGER_KEY first, as every machine will.

Backwards is the same the other way: the keyed chain is checked, then hashed the old way again.

The canonical forms are frozen here, as they were when this migration was written, over the
model's columns at this point of the migrations. A later migration adding a column to Record must
chain the records again the same way (the new column is in the hash from then on).

On PostgreSQL the append-only trigger (migration 0002) is disabled inside this migration's
transaction and enabled again before it commits; SQLite has no trigger before migration 0006.
"""

import hashlib
import hmac
import json
from datetime import UTC
from decimal import Decimal

from django.db import migrations, models

GENESIS = "0" * 64
BATCH = 1000


class LedgerDoesNotVerify(Exception):
    pass


def _instant(value):
    return value.astimezone(UTC).isoformat()


def old_hash(record, team_slug):
    """The hash the meter wrote before this migration: SHA-256 of the previous hash and 14 fields."""
    fields = {
        "sequence": record.sequence,
        "hold": str(record.hold_id),
        "job": str(record.job_id),
        "team": team_slug,
        "node": record.node,
        "cpu_set": record.cpu_set,
        "memory_mb": record.memory_mb,
        "gpu_ids": record.gpu_ids,
        "held_at": _instant(record.held_at),
        "released_at": _instant(record.released_at),
        "held_seconds": str(record.held_seconds),
        "cpu_seconds": str(record.cpu_seconds),
        "cost": str(record.cost),
        "outcome": record.outcome,
    }
    canonical = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256((record.prev_hash + canonical).encode()).hexdigest()


def keyed_hasher(Record, key):
    """The keyed hash as accounting.chain makes it: HMAC-SHA256 of the form's line (naming the
    columns) and the JSON list of every column's plain value but the hash's, by attname."""

    def plain_of(field):
        if isinstance(field, models.DateTimeField):
            return lambda value: value.astimezone(UTC).isoformat(timespec="microseconds")
        if isinstance(field, models.DecimalField):
            places = Decimal(1).scaleb(-field.decimal_places)
            return lambda value: format(value.quantize(places), "f")
        target = field.target_field if isinstance(field, models.ForeignKey) else field
        if isinstance(target, models.UUIDField):
            return str
        return lambda value: value

    columns = sorted(
        ((f.attname, plain_of(f)) for f in Record._meta.concrete_fields if f.name != "hash"), key=lambda c: c[0]
    )
    form = f"e31 ledger record v1: {','.join(name for name, _ in columns)}\n".encode()

    def keyed_hash(record, _team_slug):
        values = [None if (value := getattr(record, name)) is None else plain(value) for name, plain in columns]
        mac = hmac.new(key, form, hashlib.sha256)
        mac.update(json.dumps(values, sort_keys=True, separators=(",", ":")).encode())
        return mac.hexdigest()

    return keyed_hash


def rechain(apps, schema_editor, *, check, make):
    Record = apps.get_model("accounting", "Record")
    Ledger = apps.get_model("accounting", "Ledger")
    if not Record.objects.exists():
        return
    from accounting.chain import ledger_key  # the key's location is configuration, not schema

    key = ledger_key()
    slugs = dict(apps.get_model("teams", "Team").objects.values_list("pk", "slug"))
    checked, made = check(Record, key), make(Record, key)
    _verify(Record, Ledger, checked, slugs)
    postgresql = schema_editor.connection.vendor == "postgresql"
    if postgresql:
        schema_editor.execute("ALTER TABLE accounting_record DISABLE TRIGGER accounting_record_append_only")
    prev, batch = GENESIS, []
    for record in Record.objects.order_by("sequence").iterator(chunk_size=BATCH):
        record.prev_hash = prev
        record.hash = prev = made(record, slugs[record.team_id])
        batch.append(record)
        if len(batch) == BATCH:
            Record.objects.bulk_update(batch, ["prev_hash", "hash"])
            batch = []
    Record.objects.bulk_update(batch, ["prev_hash", "hash"])
    Ledger.objects.filter(pk=1).update(last_hash=prev)
    if postgresql:
        schema_editor.execute("ALTER TABLE accounting_record ENABLE TRIGGER accounting_record_append_only")


def _verify(Record, Ledger, hash_of, slugs):
    prev, sequence = GENESIS, 0
    for record in Record.objects.order_by("sequence").iterator(chunk_size=BATCH):
        sequence += 1
        where = f"accounting record {record.sequence} (id {record.pk})"
        if record.sequence != sequence:
            raise LedgerDoesNotVerify(f"{where}: sequence {sequence} is missing before it")
        if record.prev_hash != prev or record.hash != hash_of(record, slugs[record.team_id]):
            raise LedgerDoesNotVerify(
                f"{where} does not verify (chain break or hash mismatch): the ledger was changed before this "
                "migration, and chaining it again would hide the change. Restore the records, then migrate again."
            )
        prev = record.hash
    ledger = Ledger.objects.filter(pk=1).first()
    named = (ledger.last_sequence, ledger.last_hash) if ledger else (0, GENESIS)
    if named != (sequence, prev):
        raise LedgerDoesNotVerify(
            f"the accounting ledger row names record {named[0]}, the last record is {sequence}: the ledger was "
            "changed before this migration. Restore it, then migrate again."
        )


def forwards(apps, schema_editor):
    rechain(apps, schema_editor, check=lambda Record, key: old_hash, make=keyed_hasher)


def backwards(apps, schema_editor):
    rechain(apps, schema_editor, check=keyed_hasher, make=lambda Record, key: old_hash)


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0004_record_outcome_choices"),
        ("teams", "0001_initial"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]

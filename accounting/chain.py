"""The ledger's hash chain: each record's canonical form, its keyed hash, and appending a record."""

import functools
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from datetime import UTC
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models, transaction
from django.utils import timezone

from accounting.heads import Head, append_head, write_synced
from accounting.models import Ledger, Record

GENESIS = "0" * 64  # the prev_hash of the first record
START = Head(0, GENESIS)  # before the first record: a walk from here checks the whole chain


def ledger_key() -> bytes:
    """Never in the database, so its writers cannot re-hash."""
    configured: str | None = settings.E31_LEDGER_KEY
    return configured.encode() if configured else _key_in(Path(settings.VAR_DIR) / "ledger_key")


@functools.cache  # by path, so a VAR_DIR set later (as the tests do) reads its own file
def _key_in(path: Path) -> bytes:
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        return _make_key(path)
    if not key:
        raise ImproperlyConfigured(f"the ledger key file {path} is empty: restore it from a backup")
    return key


def _make_key(path: Path) -> bytes:
    # Linked into place whole, so two processes starting at once never read half a key and agree on one.
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(64).encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    write_synced(temporary, key, os.O_EXCL)
    try:
        os.link(temporary, path)
    except FileExistsError:
        key = path.read_bytes().strip()
    finally:
        temporary.unlink()
    return key


def _plain(field: models.Field) -> Callable[[Any], Any] | None:
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    if isinstance(field, models.DateTimeField):
        # In UTC, as the database reads it back, whatever offset it was written with.
        return lambda value: value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(field, models.DecimalField):
        places = Decimal(1).scaleb(-field.decimal_places)
        return lambda value: format(value.quantize(places), "f")
    if isinstance(target, models.UUIDField):
        return str
    return None  # json.dumps refuses any other type, so a new column of a type not handled here fails loudly


# The form is a line naming the columns, then the JSON of every column but `hash`, ids for relations
# (a slug can be edited). Each record names its `layout`, so a new column makes a new layout and the
# records written before keep verifying under their frozen form without being chained again.
V1_COLUMNS = (
    "cost", "cpu_seconds", "cpu_set", "cpus", "gpu_ids", "gpus", "held_at", "held_seconds", "hold_id", "id",
    "job_id", "memory_mb", "memory_peak_mb", "node", "outcome", "prev_hash", "released_at", "sequence", "team_id",
)  # fmt: skip
_FIELDS = {f.attname: f for f in Record._meta.concrete_fields if f.name != "hash"}
HASHED_COLUMNS: tuple[str, ...] = (*V1_COLUMNS, *sorted(name for name in _FIELDS if name not in V1_COLUMNS))
LAYOUT = 2  # the layout of the records written now
FORMS = {
    1: f"e31 ledger record v1: {','.join(V1_COLUMNS)}\n".encode(),
    2: f"e31 ledger record v2: {','.join(HASHED_COLUMNS)}\n".encode(),
}
_V1 = len(V1_COLUMNS)
SEQUENCE, PREV_HASH, ID, _LAYOUT = (HASHED_COLUMNS.index(name) for name in ("sequence", "prev_hash", "id", "layout"))
_CONVERTED = tuple((i, plain) for i, name in enumerate(HASHED_COLUMNS) if (plain := _plain(_FIELDS[name])))


def plain_row(values: Sequence[Any]) -> list[Any]:
    plain = list(values)
    for i, convert in _CONVERTED:  # only the columns whose plain value differs: this runs for every record
        if (value := plain[i]) is not None:
            plain[i] = convert(value)
    return plain


def hasher(key: bytes) -> Callable[[Sequence[Any]], str]:
    """ "" for a layout-1 record with a later column set."""
    encode = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
    v1, v2, digest = FORMS[1], FORMS[2], hmac.digest

    def hash_of(values: Sequence[Any]) -> str:
        layout = values[_LAYOUT]
        if layout == 2:
            return digest(key, v2 + encode(values).encode(), "sha256").hex()
        if layout is None and not any(v is not None for v in values[_V1:]):
            return digest(key, v1 + encode(values[:_V1]).encode(), "sha256").hex()
        return ""

    return hash_of


def record_hash(record: Record, key: bytes) -> str:
    return hasher(key)(plain_row([getattr(record, name) for name in HASHED_COLUMNS]))


def append(record: Record) -> Record:
    """In the caller's transaction, under the ledger row's lock; the heads file is written once it commits."""
    key = ledger_key()
    ledger, _ = Ledger.objects.select_for_update().get_or_create(pk=1)
    record.layout = LAYOUT
    record.sequence, record.prev_hash = ledger.last_sequence + 1, ledger.last_hash
    record.hash = record_hash(record, key)
    record.save(force_insert=True)
    Ledger.objects.filter(pk=1).update(last_sequence=record.sequence, last_hash=record.hash)
    head = Head(record.sequence, record.hash)
    transaction.on_commit(lambda: append_head(head, at=timezone.now()))
    return record


def ledger_row() -> Head | None:
    ledger = Ledger.objects.filter(pk=1).first()
    return Head(ledger.last_sequence, ledger.last_hash) if ledger else None

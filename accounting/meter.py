"""The meter: runs from hold to release; at release it writes the one record of the hold.

Records form a keyed hash chain. Each record's hash is HMAC-SHA256, under the ledger key
(accounting.ledger), of its canonical form: every column of the record but `hash` itself, the
previous record's hash (`prev_hash`) and its own `sequence` included. verify_ledger walks the
chain and checks it against the ledger row and this machine's heads file.

Layouts: a record names the form its hash covers (`layout`). Layout 1 is the form of the records
written before the rate, attempt, exit code and image were kept (their new columns are NULL, and
must stay so); layout 2 covers every column. So adding columns never re-chains the records already
written (which would need the append-only triggers lifted): old records verify under their form,
new ones under theirs. A later column makes layout 3 the same way (V1 and V2 stay frozen below).
"""

import hmac
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from accounting.fairshare import add_usage
from accounting.ledger import GENESIS, Head, Witnessed, append_head, last_head, ledger_key
from accounting.models import Ledger, Record
from accounting.rates import MONEY, Rate, rate_in_force

SECONDS = Decimal("0.001")
__all__ = ["MONEY", "Held", "Usage", "verify_ledger", "write_record"]


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float = 0.0
    memory_peak_mb: int | None = None


@dataclass(frozen=True)
class Held:
    """What one hold held, from hold to release: the plain values a record is written from."""

    hold_id: uuid.UUID
    job_id: uuid.UUID
    team_id: int
    node: str
    cpu_set: list[int]
    memory_mb: int
    gpu_ids: list[str]
    held_at: datetime
    released_at: datetime
    attempt: int | None = None
    image: str = ""


# --- the canonical form and the hash -----------------------------------------------------------
#
# A record's canonical form is the JSON list of its columns' plain values, in HASHED_COLUMNS order,
# after a line naming the form and the columns: ids as text, instants in UTC to the microsecond,
# decimals with their column's places, numbers, text and JSON as they are. PostgreSQL can render the
# same plain values itself (_POSTGRESQL), so verify_ledger parses no date, decimal or id there.


@dataclass(frozen=True)
class _Column:
    attname: str
    plain: Callable[[Any], Any]  # the plain value of a Python value (in memory, or read back by Django)
    kind: str  # "instant", "decimal", "uuid", "json" or "" (as it is)


def _column(field: models.Field) -> _Column:
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    if isinstance(field, models.DateTimeField):
        # The database keeps the instant, not the offset it was written with: a release given a local
        # time must hash the same as the record read back, which comes in UTC.
        return _Column(field.attname, lambda value: value.astimezone(UTC).isoformat(timespec="microseconds"), "instant")
    if isinstance(field, models.DecimalField):
        places = Decimal(1).scaleb(-field.decimal_places)
        return _Column(field.attname, lambda value: format(value.quantize(places), "f"), "decimal")
    if isinstance(target, models.UUIDField):
        return _Column(field.attname, str, "uuid")
    # Numbers, text and JSON as they are: json.dumps refuses any other type, so a new column of a
    # type not handled here fails the first write (and the tests) instead of hashing loosely.
    return _Column(field.attname, _as_is, "json" if isinstance(field, models.JSONField) else "")


def _as_is(value: Any) -> Any:
    return value


# Every column but the hash itself, by attname (a related team, job or hold by its id: a team's slug
# can be edited, its id cannot): layout 1's columns (frozen: the records written before layout 2) in
# name order, then every later column in name order. Derived from the model, so a new column is
# covered the day it is added (and a test fails until it is given a layout).
V1_COLUMNS = (
    "cost", "cpu_seconds", "cpu_set", "cpus", "gpu_ids", "gpus", "held_at", "held_seconds", "hold_id", "id",
    "job_id", "memory_mb", "memory_peak_mb", "node", "outcome", "prev_hash", "released_at", "sequence", "team_id",
)  # fmt: skip
_by_name = {f.attname: _column(f) for f in Record._meta.concrete_fields if f.name != "hash"}
COLUMNS: tuple[_Column, ...] = tuple(
    [_by_name[name] for name in V1_COLUMNS]
    + sorted((c for n, c in _by_name.items() if n not in V1_COLUMNS), key=lambda c: c.attname)
)
HASHED_COLUMNS: tuple[str, ...] = tuple(c.attname for c in COLUMNS)
LAYOUT = 2  # the layout of the records written now
FORMS = {
    1: f"e31 ledger record v1: {','.join(V1_COLUMNS)}\n".encode(),
    2: f"e31 ledger record v2: {','.join(HASHED_COLUMNS)}\n".encode(),
}
FORM = FORMS[LAYOUT]
_V1 = len(V1_COLUMNS)
_SEQUENCE, _PREV, _ID, _LAYOUT = (HASHED_COLUMNS.index(name) for name in ("sequence", "prev_hash", "id", "layout"))


def plain_values(record: Record) -> list[Any]:
    """The plain values of a record's columns, in HASHED_COLUMNS order."""
    return [None if (value := getattr(record, c.attname)) is None else c.plain(value) for c in COLUMNS]


def _hasher(key: bytes) -> Callable[[Sequence[Any]], str]:
    """hash(plain values) under `key`: HMAC-SHA256 of the record's layout's form and the JSON of the
    values that layout covers. A layout-1 record with any later column set has no right hash ("")."""
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
    """The hash a record should have (whatever its `hash` says), under `key`."""
    return _hasher(key)(plain_values(record))


# --- writing ------------------------------------------------------------------------------------


@transaction.atomic
def write_record(held: Held, *, outcome: str, usage: Usage, exit_code: int | None = None) -> Record:
    """Write the one record of a released hold, chained to the previous record by its hash.

    1. Lock the ledger row: it orders the records, one sequence after the other.
    2. Write the record, its hash covering every column, the previous hash among them.
    3. Move the ledger row to it (the database refuses any other move, see migration 0006).
    4. Once the transaction commits, append the new head to this machine's heads file.
    """
    key = ledger_key()
    Ledger.objects.get_or_create(pk=1)
    ledger = Ledger.objects.select_for_update().get(pk=1)
    held_seconds = Decimal((held.released_at - held.held_at).total_seconds()).quantize(SECONDS)
    cpus, gpus = len(held.cpu_set), len(held.gpu_ids)
    rate: Rate = rate_in_force(held.held_at, image=held.image)  # at RENT, whatever changed since
    record = Record(
        hold_id=held.hold_id,
        job_id=held.job_id,
        team_id=held.team_id,
        node=held.node,
        cpu_set=held.cpu_set,
        cpus=cpus,
        memory_mb=held.memory_mb,
        gpus=gpus,
        gpu_ids=held.gpu_ids,
        held_at=held.held_at,
        released_at=held.released_at,
        held_seconds=held_seconds,
        cpu_seconds=Decimal(usage.cpu_seconds).quantize(SECONDS),
        memory_peak_mb=usage.memory_peak_mb,
        cost=rate.cost(cpus=cpus, memory_mb=held.memory_mb, gpus=gpus, held_seconds=held_seconds),
        outcome=outcome,
        layout=LAYOUT,
        attempt=held.attempt,
        exit_code=exit_code,
        image=held.image or None,
        rate_id=rate.id,
        rate_core_hour=rate.core_hour,
        rate_gb_hour=rate.gb_hour,
        rate_gpu_hour=rate.gpu_hour,
        currency=rate.currency,
        sequence=ledger.last_sequence + 1,
        prev_hash=ledger.last_hash,
    )
    record.hash = record_hash(record, key)
    record.save(force_insert=True)
    Ledger.objects.filter(pk=1).update(last_sequence=record.sequence, last_hash=record.hash)
    add_usage(held.team_id, core_seconds=float(held_seconds) * cpus, at=held.released_at)
    head = Head(record.sequence, record.hash)
    transaction.on_commit(lambda: append_head(head, at=timezone.now()))
    return record


# --- verifying ----------------------------------------------------------------------------------


class Fault(StrEnum):
    HASH_MISMATCH = "hash mismatch"  # a column changed, or the hash was made without the key
    CHAIN_BREAK = "chain break"  # prev_hash is not the previous record's hash
    GAP = "gap"  # sequences missing before this record
    MISSING_TAIL = "missing tail"  # the ledger row or a heads file names a head past the last record
    HEAD_MISMATCH = "head mismatch"  # the ledger row or a heads file names another hash for a record


@dataclass(frozen=True)
class Problem:
    """The first thing wrong in the ledger, and the record where it is."""

    fault: Fault
    sequence: int
    record_id: uuid.UUID | None  # None: the record is not there (a missing tail)
    detail: str

    def __str__(self) -> str:
        where = f"record {self.sequence}" + (f" (id {self.record_id})" if self.record_id else "")
        return f"{self.fault} at {where}: {self.detail}"


@dataclass(frozen=True)
class LedgerCheck:
    """What verify_ledger found: true when nothing is wrong (warnings are not faults)."""

    records: int
    head: Head  # the last record's; sequence 0 when there is none
    problem: Problem | None = None
    ledger_row: Head | None = None
    witnessed: tuple[Witnessed, ...] = ()
    warnings: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class _Anchor:
    """A head kept apart from the records (the ledger row, a heads file): the chain must reach it."""

    name: str
    head: Head


def verify_chain(records: Iterable[Record], *, key: bytes | None = None) -> LedgerCheck:
    """The chain of `records` (read in any order: sequence orders them) from the first one on."""
    rows = ((plain_values(r), r.hash) for r in sorted(records, key=lambda r: r.sequence))
    return _walk(rows, key or ledger_key(), anchors=())


def verify_ledger(*, heads_files: Sequence[Path] | None = None, chunk_size: int = 5000) -> LedgerCheck:
    """The whole ledger: the chain of every record, then the heads kept apart from it.

    1. Read the heads first, the ledger row's and each heads file's (default: this machine's). A
       release committing meanwhile only adds records after them, so reading needs no lock.
    2. Stream the records by sequence, their plain values only (no model, no query per record), and
       check each one: its sequence follows (else a gap), its prev_hash is the previous record's
       hash (else a chain break) and its hash is the HMAC of its columns (else a hash mismatch).
    3. Every head must be in the chain: past its end, records were cut off (a missing tail); at
       another hash, the record was replaced (a head mismatch).
    """
    ledger = Ledger.objects.filter(pk=1).first()
    ledger_row = Head(ledger.last_sequence, ledger.last_hash) if ledger else None
    witnessed = tuple(last_head(path) for path in heads_files) if heads_files is not None else (last_head(),)
    anchors = [_Anchor("the ledger row", ledger_row)] if ledger_row else []
    anchors += [_Anchor(f"the heads file {w.path}", w.head) for w in witnessed if w.head]
    key = ledger_key()
    if connection.vendor == "postgresql":
        rows = _canonical_by_postgresql(chunk_size)
        check = _walk(rows, key, anchors=anchors, hash_of=_canonical_hasher(key), positions=CANONICAL_POSITIONS)
    else:
        check = _walk(_read_by_django(chunk_size), key, anchors=anchors)
    warnings = []
    for w in witnessed:
        if w.unreadable:
            warnings.append(f"{w.unreadable} unreadable lines at the end of the heads file {w.path}")
        behind = check.head.sequence - (w.head.sequence if w.head else 0)
        if check.problem is None and behind > 0:
            warnings.append(
                f"the database is {behind} records ahead of the heads file {w.path} "
                f"({'no head in it' if w.head is None else f'its head: {w.head}'}): written by another "
                "machine, or by this one without reaching the file (a crash between commit and append)"
            )
    return LedgerCheck(
        records=check.records,
        head=check.head,
        problem=check.problem,
        ledger_row=ledger_row,
        witnessed=witnessed,
        warnings=tuple(warnings),
    )


Row = tuple[Sequence[Any], str]  # a record's plain values (HASHED_COLUMNS order) and its stored hash


def _read_by_django(chunk_size: int) -> Iterator[Row]:
    rows = Record.objects.order_by("sequence").values_list(*HASHED_COLUMNS, "hash").iterator(chunk_size=chunk_size)
    for row in rows:
        yield [None if value is None else c.plain(value) for c, value in zip(COLUMNS, row[:-1], strict=True)], row[-1]


# PostgreSQL renders each plain value as Python's plain() does (a test checks they agree), so a
# row comes back as text and numbers: parsing dates, decimals and ids in Python would cost more
# than the hash itself.
_POSTGRESQL = {
    "instant": """to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')""",
    "decimal": "{}::text",
    "uuid": "{}::text",
    "json": "{}::text",  # then parsed: jsonb's own text orders keys its way
    "": "{}",
}


def _rendered_by_postgresql(chunk_size: int) -> Iterator[Row]:
    quote = connection.ops.quote_name
    fields = {f.attname: f for f in Record._meta.concrete_fields}
    selected = [_POSTGRESQL[c.kind].format(quote(fields[c.attname].column)) for c in COLUMNS]
    table, json_columns = quote(Record._meta.db_table), [i for i, c in enumerate(COLUMNS) if c.kind == "json"]
    sql = f"SELECT {', '.join(selected)}, {quote('hash')} FROM {table} ORDER BY {quote('sequence')}"
    parsed: dict[str, Any] = {}  # JSON texts repeat (the same cores, no gpus): each is parsed once
    # A server-side cursor keeps memory flat, unless the database is behind a transaction pooler
    # (DISABLE_SERVER_SIDE_CURSORS, as Django's own iterator() honours it).
    server_side = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    with connection.chunked_cursor() if server_side else connection.cursor() as cursor:
        cursor.execute(sql)
        while rows := cursor.fetchmany(chunk_size):
            if len(parsed) > 10_000:
                parsed.clear()
            for row in rows:
                values = list(row)
                stored = values.pop()
                for i in json_columns:
                    if (text := values[i]) is not None:
                        values[i] = parsed[text] if text in parsed else parsed.setdefault(text, json.loads(text))
                yield values, stored


# The fast path of verify_ledger on PostgreSQL: the database renders each record's canonical JSON
# itself (the layout-1 columns, and the later ones, as two texts), so Python only joins bytes and
# computes the HMAC: no per-column conversion, no JSON encoding. The rendering matches Python's for
# every value the meter writes (ASCII text, integers, decimals, instants, ids, flat arrays); for any
# other (a non-ASCII node name, say) it differs, the HMAC does not match, and that one record is read
# and hashed again the exact way (_read_by_django's plain values) before anything is reported. So the
# fast path can only be slow on odd records, never wrong: a match means the database holds exactly
# the text that was hashed at release.


def _json_sql(column: str, kind: str, *, number: bool) -> str:
    """SQL rendering the column's value as json.dumps writes its plain value (NULL: null)."""
    if kind == "instant":  # digits, "-", ":", ".", "T", "+": nothing to escape
        value = f"""'"' || {_POSTGRESQL["instant"].format(column)} || '"'"""
    elif kind in ("decimal", "uuid"):  # the same
        value = f"""'"' || {column}::text || '"'"""
    elif kind == "json" and column.strip('"') == "cpu_set":
        # Core ids are numbers: jsonb writes them "[0, 1]"; no string is in the array the meter wrote,
        # so any other value renders with quotes or ": " and cannot come out as the text hashed.
        value = f"replace({column}::text, ', ', ',')"
    elif kind == "json":  # a flat array, compact as json.dumps writes it; most are empty (no gpu)
        elements = (
            f"SELECT string_agg(e::text, ',' ORDER BY o) FROM jsonb_array_elements({column}) WITH ORDINALITY AS t(e, o)"
        )
        value = f"CASE WHEN {column} = '[]'::jsonb THEN '[]' ELSE '[' || ({elements}) || ']' END"
    elif number:
        value = f"{column}::text"
    else:  # text: JSON-escaped (non-ASCII stays as it is, unlike json.dumps: such a record is checked the exact way)
        value = f"to_json({column})::text"
    return f"coalesce({value}, 'null')"


CANONICAL_POSITIONS = (0, 1, 2)  # sequence, prev_hash, id in a row of _canonical_by_postgresql


def _canonical_by_postgresql(chunk_size: int) -> Iterator[Row]:
    quote = connection.ops.quote_name
    fields = {f.attname: f for f in Record._meta.concrete_fields}
    numbers = (models.IntegerField, models.ForeignKey)  # every integer field (and the team's id)
    rendered = [
        _json_sql(quote(fields[c.attname].column), c.kind, number=isinstance(fields[c.attname], numbers))
        for c in COLUMNS
    ]
    first, later = ", ".join(rendered[:_V1]), ", ".join(rendered[_V1:])
    table = quote(Record._meta.db_table)
    sql = (
        f"SELECT {quote('sequence')}, {quote('prev_hash')}, {quote('id')}::text, {quote('layout')}, {quote('hash')}, "
        f"concat_ws(',', {first}), concat_ws(',', {later}) FROM {table} ORDER BY {quote('sequence')}"
    )
    server_side = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    with connection.chunked_cursor() if server_side else connection.cursor() as cursor:
        cursor.execute(sql)
        while rows := cursor.fetchmany(chunk_size):
            for row in rows:
                yield row, row[4]  # (sequence, prev_hash, id, layout, hash, body1, body2): CANONICAL_POSITIONS


def _canonical_hasher(key: bytes) -> Callable[[Sequence[Any]], str]:
    """hash(a row of _canonical_by_postgresql): from the database's canonical text, else the exact way."""
    exact, digest, width = _hasher(key), hmac.digest, len(COLUMNS)
    v1, v2 = FORMS[1] + b"[", FORMS[2] + b"["
    nulls = ",".join(["null"] * (width - _V1))

    def hash_of(values: Sequence[Any]) -> str:
        _, _, record_id, layout, stored, body1, body2 = values
        if layout == 2:
            found = digest(key, v2 + f"{body1},{body2}]".encode(), "sha256").hex()
        elif layout is None and body2 == nulls:
            found = digest(key, v1 + f"{body1}]".encode(), "sha256").hex()
        else:
            found = ""
        if found == stored:
            return found
        return exact(_plain_row(record_id))

    return hash_of


def _plain_row(record_id: str) -> list[Any]:
    row = Record.objects.filter(pk=record_id).values_list(*HASHED_COLUMNS).get()
    return [None if value is None else c.plain(value) for c, value in zip(COLUMNS, row, strict=True)]


def _walk(
    rows: Iterable[Row],
    key: bytes,
    *,
    anchors: Sequence[_Anchor],
    hash_of: Callable[[Sequence[Any]], str] | None = None,
    positions: tuple[int, int, int] = (_SEQUENCE, _PREV, _ID),
) -> LedgerCheck:
    """Check each record in sequence order; stop at the first fault. `positions`: where a row's values
    hold its sequence, prev_hash and id (by default, the plain values' places)."""
    hash_of = hash_of or _hasher(key)
    at_sequence, at_prev, at_id = positions
    at_anchor = {anchor.head.sequence: (GENESIS, "") for anchor in anchors}  # sequence → (hash, record id)
    prev, count = GENESIS, 0

    def found(fault: Fault, sequence: int, record_id: str | None, detail: str) -> LedgerCheck:
        problem = Problem(fault, sequence, uuid.UUID(record_id) if record_id else None, detail)
        return LedgerCheck(count, Head(count, prev), problem)

    for values, stored in rows:
        sequence, record_id = values[at_sequence], values[at_id]
        if sequence != count + 1:
            first, last = count + 1, sequence - 1
            missing = f"sequence {first}" if first == last else f"sequences {first} to {last}"
            return found(Fault.GAP, sequence, record_id, f"{missing} missing before it")
        if values[at_prev] != prev:
            detail = f"its prev_hash {values[at_prev][:12]}… is not the previous record's hash {prev[:12]}…"
            return found(Fault.CHAIN_BREAK, sequence, record_id, detail)
        if not hmac.compare_digest(hash_of(values), stored):
            detail = "its hash is not the keyed hash of its columns: a column changed, or it was made without the key"
            return found(Fault.HASH_MISMATCH, sequence, record_id, detail)
        if sequence in at_anchor:
            at_anchor[sequence] = (stored, record_id)
        prev, count = stored, count + 1
    for anchor in anchors:
        named = anchor.head
        if named.sequence > count:
            lost = named.sequence - count
            detail = f"{anchor.name} names {named}, the last record is {count}: {lost} records removed from the end"
            return found(Fault.MISSING_TAIL, count + 1, None, detail)
        if named.sequence == 0:
            if named.hash != GENESIS:
                return found(Fault.HEAD_MISMATCH, 0, None, f"{anchor.name} names {named}, before any record")
            continue
        stored, record_id = at_anchor[named.sequence]
        if stored != named.hash:
            detail = f"{anchor.name} names {named}, the record's hash is {stored[:12]}…"
            return found(Fault.HEAD_MISMATCH, named.sequence, record_id, detail)
    return LedgerCheck(count, Head(count, prev))

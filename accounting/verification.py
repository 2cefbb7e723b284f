"""Verifying the ledger: one reader walks the chain from a verified head on, and each run is kept."""

import hmac
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.utils import timezone

from accounting.chain import (
    GENESIS,
    HASHED_COLUMNS,
    ID,
    PREV_HASH,
    SEQUENCE,
    START,
    hasher,
    ledger_key,
    ledger_row,
    plain_row,
)
from accounting.heads import Head, Witnessed, last_head
from accounting.models import LedgerVerification, Record


class Fault(StrEnum):
    HASH_MISMATCH = "hash mismatch"  # a column changed, or the hash was made without the key
    CHAIN_BREAK = "chain break"  # prev_hash is not the previous record's hash
    GAP = "gap"  # sequences missing before this record
    MISSING_TAIL = "missing tail"  # the ledger row or a heads file names a head past the last record
    HEAD_MISMATCH = "head mismatch"  # a head kept apart names another hash for a record, or a record gone


@dataclass(frozen=True)
class Problem:
    fault: Fault
    sequence: int
    record_id: uuid.UUID | None  # None: the record is not there
    detail: str

    def __str__(self) -> str:
        where = f"record {self.sequence}" + (f" (id {self.record_id})" if self.record_id else "")
        return f"{self.fault} at {where}: {self.detail}"


@dataclass(frozen=True)
class LedgerCheck:
    records: int  # the records this walk checked (after the head it started from)
    head: Head  # the last record's; sequence 0 when there is none
    problem: Problem | None = None
    witnessed: tuple[Witnessed, ...] = ()
    warnings: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class _Anchor:
    name: str
    head: Head


Row = tuple[Sequence[Any], str]  # a record's plain values (HASHED_COLUMNS order) and its stored hash


def verify_ledger(
    *, since: Head = START, heads_files: Sequence[Path] | None = None, chunk_size: int = 5000
) -> LedgerCheck:
    """The heads are read first: a release committing meanwhile only adds records after them, so reading
    needs no lock. Heads at or before `since` are compared by one query."""
    row = ledger_row()
    witnessed = tuple(last_head(path) for path in heads_files) if heads_files is not None else (last_head(),)
    anchors = [_Anchor("the last verified head", since)] if since.sequence else []
    anchors += [_Anchor("the ledger row", row)] if row else []
    anchors += [_Anchor(f"the heads file {w.path}", w.head) for w in witnessed if w.head]
    earlier = {a.head.sequence for a in anchors if 0 < a.head.sequence <= since.sequence}
    known = {
        sequence: (stored, str(record_id))
        for sequence, stored, record_id in Record.objects.filter(sequence__in=earlier).values_list(
            "sequence", "hash", "id"
        )
    }
    rows = (
        Record.objects.filter(sequence__gt=since.sequence)
        .order_by("sequence")
        .values_list(*HASHED_COLUMNS, "hash")
        .iterator(chunk_size=chunk_size)
    )
    check = _walk(((plain_row(r[:-1]), r[-1]) for r in rows), ledger_key(), since=since, anchors=anchors, known=known)
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
    return replace(check, witnessed=witnessed, warnings=tuple(warnings))


def _walk(
    rows: Iterable[Row],
    key: bytes,
    *,
    since: Head,
    anchors: Sequence[_Anchor],
    known: Mapping[int, tuple[str, str]],
) -> LedgerCheck:
    """Stops at the first fault; `known`: the anchors' records up to `since`."""
    hash_of = hasher(key)
    at_anchor = {a.head.sequence: known.get(a.head.sequence, ("", "")) for a in anchors}
    prev, count = since.hash, since.sequence

    def found(fault: Fault, sequence: int, record_id: str | None, detail: str) -> LedgerCheck:
        problem = Problem(fault, sequence, uuid.UUID(record_id) if record_id else None, detail)
        return LedgerCheck(count - since.sequence, Head(count, prev), problem)

    for values, stored in rows:
        sequence, record_id = values[SEQUENCE], values[ID]
        if sequence != count + 1:
            first, last = count + 1, sequence - 1
            missing = f"sequence {first}" if first == last else f"sequences {first} to {last}"
            return found(Fault.GAP, sequence, record_id, f"{missing} missing before it")
        if values[PREV_HASH] != prev:
            detail = f"its prev_hash {values[PREV_HASH][:12]}… is not the previous record's hash {prev[:12]}…"
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
        if not record_id:
            return found(Fault.HEAD_MISMATCH, named.sequence, None, f"{anchor.name} names {named}, a record gone")
        if stored != named.hash:
            detail = f"{anchor.name} names {named}, the record's hash is {stored[:12]}…"
            return found(Fault.HEAD_MISMATCH, named.sequence, record_id, detail)
    return LedgerCheck(count - since.sequence, Head(count, prev))


def last_verification() -> LedgerVerification | None:
    return LedgerVerification.objects.order_by("-ran_at", "-id").first()


def head_mac(head: Head) -> str:
    return hmac.new(ledger_key(), f"{head.sequence}:{head.hash}".encode(), "sha256").hexdigest()


def last_verified_head() -> Head:
    """START after a fault, so it stays reported, and when the head's MAC does not verify."""
    last = last_verification()
    if last is None or not last.ok or not last.head_hash:
        return START
    head = Head(last.head_sequence, last.head_hash)
    return head if hmac.compare_digest(last.head_mac, head_mac(head)) else START


def verify_and_keep(*, full: bool = True, heads_files: Sequence[Path] | None = None) -> LedgerCheck:
    started = time.monotonic()
    since = START if full else last_verified_head()
    check = verify_ledger(since=since, heads_files=heads_files)
    LedgerVerification.objects.create(
        ran_at=timezone.now(),
        ok=bool(check),
        since_sequence=since.sequence,
        records=check.records,
        head_sequence=check.head.sequence,
        head_hash=check.head.hash,
        head_mac=head_mac(check.head),
        problem=str(check.problem or ""),
        seconds=time.monotonic() - started,
    )
    return check

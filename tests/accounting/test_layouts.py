"""Layouts of the hash: records written before the rate, attempt, exit code and image were kept (layout 1)
verify under their own form beside new ones (layout 2), with no re-chaining; and neither can pass for the other."""

import pytest

from accounting.chain import FORMS, HASHED_COLUMNS, LAYOUT, V1_COLUMNS, ledger_key, record_hash
from accounting.models import Record
from accounting.verification import Fault, verify_ledger
from tests.accounting.test_ledger import on_postgresql, set_columns, tamper

NEW_COLUMNS = [c for c in HASHED_COLUMNS if c not in V1_COLUMNS]


def test_layout_2_covers_every_column_and_layout_1_its_own():
    assert LAYOUT == 2 and set(NEW_COLUMNS) >= {"layout", "rate_id", "rate_core_hour", "attempt", "exit_code"}
    assert FORMS[1] == f"e31 ledger record v1: {','.join(sorted(V1_COLUMNS))}\n".encode()  # as before layouts
    assert list(HASHED_COLUMNS[: len(V1_COLUMNS)]) == sorted(V1_COLUMNS)


def as_layout_1(records: list[Record]) -> list[Record]:
    """The chain as if its first record had been written before layout 2 (new columns NULL, v1 hash),
    the later ones chained to it: what a database migrated with records of both layouts holds."""
    key, prev = ledger_key(), "0" * 64
    for i, record in enumerate(sorted(records, key=lambda r: r.sequence)):
        if i == 0:
            for name in NEW_COLUMNS:
                setattr(record, name, None)
        record.prev_hash = prev
        record.hash = prev = record_hash(record, key)
        set_columns(record, **{n: getattr(record, n) for n in [*NEW_COLUMNS, "prev_hash", "hash"]})
    tamper("UPDATE accounting_ledger SET last_hash = %s", [prev])
    return records


@on_postgresql
def test_records_of_both_layouts_verify_together(chain):
    as_layout_1(chain)

    check = verify_ledger(heads_files=[])

    assert check, check.problem
    assert list(Record.objects.order_by("sequence").values_list("layout", flat=True)) == [None, 2, 2]


@on_postgresql
@pytest.mark.parametrize(("column", "value"), [("rate_core_hour", "1.000000"), ("layout", 1), ("attempt", 1)])
def test_a_layout_1_record_given_a_later_column_is_found(chain, column, value):
    first = as_layout_1(chain)[0]

    set_columns(first, **{column: value})

    check = verify_ledger(heads_files=[])
    assert not check and (check.problem.fault, check.problem.sequence) == (Fault.HASH_MISMATCH, first.sequence)


@on_postgresql
def test_a_layout_2_record_relabelled_layout_1_is_found(chain):
    last = chain[-1]

    set_columns(last, **{name: None for name in NEW_COLUMNS})

    check = verify_ledger(heads_files=[])
    assert not check and (check.problem.fault, check.problem.sequence) == (Fault.HASH_MISMATCH, last.sequence)


@on_postgresql
def test_a_record_with_text_out_of_ascii_verifies_and_a_change_to_it_is_found(chain):
    key, prev = ledger_key(), "0" * 64
    for record in sorted(chain, key=lambda r: r.sequence):
        if record.sequence == chain[0].sequence:
            record.node = "nœud-1"
        record.prev_hash = prev
        record.hash = prev = record_hash(record, key)
        set_columns(record, node=record.node, prev_hash=record.prev_hash, hash=record.hash)
    tamper("UPDATE accounting_ledger SET last_hash = %s", [prev])

    assert verify_ledger(heads_files=[])
    set_columns(chain[0], node="nœud-2")
    check = verify_ledger(heads_files=[])
    assert not check and (check.problem.fault, check.problem.sequence) == (Fault.HASH_MISMATCH, chain[0].sequence)

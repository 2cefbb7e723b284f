"""Accounting over 1,000,000 records in PostgreSQL (no containers):

- `statement_s`: one team's monthly statement (every line, the exact total, the ledger range);
- `utilisation_s`: the pool's utilisation report of a month by day (20 nodes, per node and overall);
- `verify_full_s` and `verify_per_s`: verify_ledger over the whole chain (keyed HMAC of every record,
  streamed), as `manage.py verify_ledger` runs it;
- `verify_daily_s`: the daily check (accounting.tasks) when the last check verified the chain up to a
  day's records before its end (a year's records spread evenly: n / 365 of them).

The records are made fast but for real: jobs and holds with one INSERT … SELECT generate_series each,
the records by COPY, each one's keyed hash computed by accounting.chain's own hasher over its
canonical form and chained to the previous one (the append-only triggers allow INSERT). Spread
over 2025, 10 teams, 20 nodes. Anchors measured in the same run: a plain `SELECT count(*)` of the
records, and a bare HMAC-SHA256 loop over the same number of 400-byte messages (`hmac_per_s`), to
which verify_per_s is compared (`verify_vs_bare_hmac`): on a shared machine that ratio moves less
than the figures do.

Prints the headline figures last (medians of three runs), each beside its anchor and the ratio:
`statement_s` and `utilisation_s` beside `anchor_count_s`, `verify_per_s` beside `hmac_per_s`,
`verify_daily_s` beside `verify_full_s`.
Run: .venv/bin/python bench/accounting.py [--records N]
"""

import argparse
import hashlib
import hmac
import os
import uuid

from _setup import Timer, machine, throwaway_database

TEAMS, NODES, CORES = 10, 20, 64


def uid(kind: str, i: int) -> uuid.UUID:
    return uuid.UUID(hex=hashlib.md5(f"{kind}{i}".encode()).hexdigest())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    os.environ["E31_LEDGER_KEY"] = "bench-ledger-key-" + "k" * 40  # not the machine's key file
    throwaway_database("e31_bench_accounting")
    n = args.records

    with Timer() as made:
        first, last = populate(n)
    print(machine())
    print(f"records made: {n} in {made.seconds:.1f} s (jobs and holds by INSERT … SELECT, records by COPY)")
    report(n, first, last)


def populate(n: int):
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection

    from accounting.chain import GENESIS, HASHED_COLUMNS, hasher, ledger_key, plain_row
    from accounting.models import Ledger, RateCard, Record
    from accounting.rates import rate_in_force
    from jobs.models import Job, RuntimeImage
    from pool.models import Hold
    from pool.nodes import Capacity, register
    from teams.models import Team

    start = datetime(2025, 1, 1, tzinfo=UTC)
    user = get_user_model().objects.create(username="bench")
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")
    teams = [Team.objects.create(slug=f"t{i}", name=f"Team {i}") for i in range(TEAMS)]
    nodes = [
        register(f"n{i:02d}", Capacity(cpu_ids=list(range(CORES)), memory_mb=256 * 1024, gpu_ids=[]), now=start)
        for i in range(NODES)
    ]
    RateCard.objects.create(
        effective_from=start, core_hour=Decimal("0.04"), gb_hour=Decimal("0.005"), gpu_hour=Decimal("0.9"),
        created_at=start,
    )  # fmt: skip
    rate = rate_in_force(start)
    step_us = 365 * 86400 * 10**6 // n
    team_ids = [t.pk for t in teams]
    node_ids = [nd.pk for nd in nodes]
    job_columns = ["id", "team_id", "submitted_by_id", "name", "image_id", "command", "cpus", "memory_mb",
                   "time_limit_s", "stage", "outcome", "submitted_at", "held_at", "released_at"]  # fmt: skip
    hold_columns = ["id", "job_id", "node_id", "cpu_set", "memory_mb", "held_at", "released_at", "runtime"]
    job_rest, job_defaults = other_columns(Job, job_columns)
    hold_rest, hold_defaults = other_columns(Hold, hold_columns)
    with connection.cursor() as cursor:
        # The jobs and holds the records point to (their own columns matter little here: the others take
        # their fields' defaults).
        cursor.execute(
            f"""
            INSERT INTO jobs_job ({", ".join(job_columns + job_rest)})
            SELECT md5('j' || i)::uuid, (%s::int[])[i %% %s + 1], %s, 'bench job ' || i, %s, '["true"]',
                1 + i %% 4, 512 * (1 + i %% 4), 7200, 'release', 'succeeded',
                %s + (i::bigint * %s::bigint) * interval '1 microsecond',
                %s + (i::bigint * %s::bigint) * interval '1 microsecond',
                %s + (i::bigint * %s::bigint) * interval '1 microsecond'
                {"".join(", %s" for _ in job_rest)}
            FROM generate_series(1, %s) AS i
            """,
            [team_ids, TEAMS, user.pk, image.pk, start, step_us, start, step_us, start, step_us, *job_defaults, n],
        )
        cursor.execute(
            f"""
            INSERT INTO pool_hold ({", ".join(hold_columns + hold_rest)})
            SELECT md5('h' || i)::uuid, md5('j' || i)::uuid, (%s::int[])[i %% %s + 1], '[0]', 512,
                %s + (i::bigint * %s::bigint) * interval '1 microsecond',
                %s + (i::bigint * %s::bigint) * interval '1 microsecond', 'runc'
                {"".join(", %s" for _ in hold_rest)}
            FROM generate_series(1, %s) AS i
            """,
            [node_ids, NODES, start, step_us, start, step_us, *hold_defaults, n],
        )
    hash_of = hasher(ledger_key())
    fields = {f.attname: f for f in Record._meta.concrete_fields}
    names = list(HASHED_COLUMNS)
    copy_columns = ", ".join(connection.ops.quote_name(fields[a].column) for a in [*names, "hash"])
    prev = GENESIS
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY accounting_record ({copy_columns}) FROM STDIN") as copy,
    ):
        for i in range(1, n + 1):
            cpus = 1 + i % 4
            memory_mb = 512 * cpus
            held_at = start + timedelta(microseconds=i * step_us)
            held_seconds = Decimal(600 + (i * 7919) % 7200)
            row = {
                "cost": rate.cost(cpus=cpus, memory_mb=memory_mb, gpus=0, held_seconds=held_seconds),
                "cpu_seconds": (held_seconds * cpus * Decimal("0.6")).quantize(Decimal("0.001")),
                "cpu_set": list(range(cpus)), "cpus": cpus, "gpu_ids": [], "gpus": 0, "held_at": held_at,
                "held_seconds": held_seconds, "hold_id": uid("h", i), "id": uid("r", i), "job_id": uid("j", i),
                "memory_mb": memory_mb, "memory_peak_mb": memory_mb // 2, "node": f"n{i % NODES:02d}",
                "outcome": "succeeded", "prev_hash": prev,
                "released_at": held_at + timedelta(seconds=int(held_seconds)),
                "sequence": i, "team_id": team_ids[i % TEAMS], "attempt": 1, "currency": rate.currency,
                "exit_code": 0, "image": "busybox", "layout": 2, "rate_core_hour": rate.core_hour,
                "rate_gb_hour": rate.gb_hour, "rate_gpu_hour": rate.gpu_hour, "rate_id": rate.id,
            }  # fmt: skip
            prev = hash_of(plain_row([row[a] for a in names]))
            copy.write_row([_db(row[a]) for a in names] + [prev])
    Ledger.objects.create(pk=1, last_sequence=n, last_hash=prev)  # an INSERT: the forward-only trigger is on UPDATE
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return start, prev


def other_columns(model, given: list[str]) -> tuple[list[str], list]:
    """The columns of `model` that `given` leaves out and may not be NULL, quoted, and their fields' defaults
    as the database takes them: the INSERT … SELECT keeps working as the models grow."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields if f.column not in given and not f.null]
    columns = [connection.ops.quote_name(f.column) for f in fields]
    return columns, [f.get_db_prep_save(f.get_default(), connection) for f in fields]


def _db(value):
    import json

    return json.dumps(value) if isinstance(value, list) else value


def report(n: int, start, last_hash) -> None:
    from datetime import date, timedelta

    from django.db import connection
    from django.utils import timezone

    from accounting.heads import Head
    from accounting.models import LedgerVerification, Record
    from accounting.statements import statement
    from accounting.verification import head_mac, verify_and_keep, verify_ledger
    from pool.utilisation import utilisation
    from teams.models import Team

    team = Team.objects.get(slug="t3")
    with Timer() as count_timer:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM accounting_record")
            counted = cursor.fetchone()[0]
    assert counted == n
    statement(team, date(2025, 5, 1))  # warm the cache as a second request would find it
    since = start.replace(month=6)
    statement_times, utilisation_times = [], []
    for _ in range(3):  # the median of three: the machine is shared
        with Timer() as statement_timer:
            found = statement(team, date(2025, 6, 1))
        statement_times.append(statement_timer.seconds)
        with Timer() as utilisation_timer:
            used = utilisation(since=since, until=since + timedelta(days=30), step="day", now=timezone.now()).as_dict()
        utilisation_times.append(utilisation_timer.seconds)
    verify_times = []
    for _ in range(3):
        with Timer() as verify_timer:
            check = verify_ledger(heads_files=[])
        verify_times.append(verify_timer.seconds)
    assert check, check.problem
    assert check.records == n and check.head.hash == last_hash
    day = n // 365
    verified = Record.objects.get(sequence=n - day)
    daily_times = []
    for _ in range(3):
        # The last check verified the chain up to a day's records before its end.
        LedgerVerification.objects.create(
            ran_at=timezone.now(), ok=True, records=n - day, head_sequence=verified.sequence,
            head_hash=verified.hash, head_mac=head_mac(Head(verified.sequence, verified.hash)), seconds=0,
        )  # fmt: skip
        with Timer() as daily_timer:
            daily = verify_and_keep(full=False, heads_files=[])
        daily_times.append(daily_timer.seconds)
        assert daily and daily.records == day, daily.problem
    key, message = b"k" * 57, b"x" * 400
    with Timer() as hmac_timer:
        for _ in range(n):
            hmac.digest(key, message, "sha256")
    verify_per_s = n / sorted(verify_times)[1]
    hmac_per_s = n / hmac_timer.seconds
    statement_s, utilisation_s = sorted(statement_times)[1], sorted(utilisation_times)[1]
    verify_s, daily_s = sorted(verify_times)[1], sorted(daily_times)[1]
    print(f"statement: {len(found.lines)} lines, total {found.total_cost} {found.currency}")
    print(
        f"utilisation: {len(used['nodes'])} nodes × {len(used['buckets'])} days, "
        f"overall {used['overall']['utilisation']}"
    )
    runs = f"statement {_list(statement_times)} s, utilisation {_list(utilisation_times)} s"
    print(f"runs: {runs}, verify {_list(verify_times)} s, daily check of {day} records {_list(daily_times)} s")
    print(f"anchor_count_s: {count_timer.seconds:.3f} s (SELECT count(*) over {n} records)")
    print(f"statement_s: {statement_s:.3f} s")
    print(f"statement_vs_count_ratio: {statement_s / count_timer.seconds:.2f}")
    print(f"utilisation_s: {utilisation_s:.3f} s")
    print(f"utilisation_vs_count_ratio: {utilisation_s / count_timer.seconds:.2f}")
    print(f"hmac_per_s: {hmac_per_s:.0f} messages/s (a bare HMAC-SHA256 loop, 400-byte messages)")
    print(f"verify_per_s: {verify_per_s:.0f} records/s")
    print(f"verify_vs_bare_hmac: {verify_per_s / hmac_per_s:.2f}")
    print(f"verify_full_s: {verify_s:.3f} s")
    print(f"verify_daily_s: {daily_s:.3f} s ({day} records)")
    print(f"verify_daily_vs_full_ratio: {daily_s / verify_s:.3f}")


def _list(times: list[float]) -> str:
    return " ".join(f"{t:.3f}" for t in times)


if __name__ == "__main__":
    main()

"""The operator panel's chart of the pool's cores in use (drawn by core.charts)."""

from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import connection

from accounting.models import Record
from core.charts import Chart, bar_chart
from pool.models import Hold, Node


def utilisation(*, now: datetime, days: int = 7, bucket_hours: int = 6) -> Chart:
    """The pool's cores in use over the last `days`, as the average number of held cores in each
    bucket: the records (held_at to released_at) and the holds still running, each counted for the
    part of its time inside a bucket. Summed by the database on PostgreSQL; the capacity line is the
    cores of the nodes not offline now.

    Records are append-only and written as their holds end: the buckets that ended over a day ago
    never change (a hold still running then was counted up to their end), so they are kept in the
    cache until the buckets move on (each hour), and only the last day's buckets are summed live."""
    bucket = timedelta(hours=bucket_hours)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(days=days)
    count = int((end - start) / bucket)
    if connection.vendor == "postgresql":
        closed = max(0, min(count, int((now - timedelta(days=1) - start) / bucket)))
        key = f"ops:utilisation:{connection.settings_dict['NAME']}:{start:%Y%m%d%H}:{bucket_hours}:{closed}"
        past = cache.get(key)
        if past is None:
            past = core_seconds_by_bucket_sql(start=start, bucket=bucket, count=closed, now=now)
            cache.set(key, past, timeout=2 * 3600)
        live = core_seconds_by_bucket_sql(start=start, bucket=bucket, count=count, now=now, first=closed)
        seconds = past + live[closed:]
    else:
        seconds = core_seconds_by_bucket(start=start, bucket=bucket, count=count, now=now)
    capacity = sum(len(ids) for ids in Node.objects.exclude(state=Node.State.OFFLINE).values_list("cpu_ids", flat=True))
    points = [((start + i * bucket).strftime("%m-%d %H:%M"), seconds[i] / bucket.total_seconds()) for i in range(count)]
    every = max(1, 24 // bucket_hours)  # a label a day
    return bar_chart(points, title="Cores in use", unit="cores", limit=capacity or None, every=every)


def core_seconds_by_bucket(*, start: datetime, bucket: timedelta, count: int, now: datetime) -> list[float]:
    """Held core-seconds in each of `count` buckets from `start`, summed here (any database)."""
    end = start + count * bucket
    seconds = [0.0] * count
    spans = list(Record.objects.filter(released_at__gt=start).order_by().values_list("held_at", "released_at", "cpus"))
    spans += [(held, now, len(cpus)) for held, cpus in
              Hold.objects.filter(released_at__isnull=True).values_list("held_at", "cpu_set")]  # fmt: skip
    for held, released, cpus in spans:
        first = max(0, int((max(held, start) - start) / bucket))
        last = min(count - 1, int((min(released, end) - start) / bucket))
        for i in range(first, last + 1):
            b0 = start + i * bucket
            overlap = (min(released, b0 + bucket) - max(held, b0)).total_seconds()
            if overlap > 0:
                seconds[i] += overlap * cpus
    return seconds


# Each span (a record, or a hold still running until now) is cut into the buckets it overlaps
# (generate_series over the bucket numbers of its start and end), and the overlaps summed per bucket.
# In seconds from the start as double precision (date_part): EXTRACT would give numerics, several
# times slower to add and compare.
_BUCKETS_SQL = """
WITH spans AS (
    SELECT date_part('epoch', held_at - %(start)s) AS a, date_part('epoch', released_at - %(start)s) AS z, cpus
    FROM {record} WHERE released_at > %(start)s + %(first)s * %(bucket)s
    UNION ALL
    SELECT date_part('epoch', held_at - %(start)s), date_part('epoch', %(now)s - %(start)s), jsonb_array_length(cpu_set)
    FROM {hold} WHERE released_at IS NULL
)
SELECT b.i, SUM(s.cpus * (LEAST(s.z, (b.i + 1) * %(bucket_s)s) - GREATEST(s.a, b.i * %(bucket_s)s)))
FROM spans s
CROSS JOIN LATERAL generate_series(
    GREATEST(%(first)s, FLOOR(s.a / %(bucket_s)s))::int, LEAST(%(count)s - 1, FLOOR(s.z / %(bucket_s)s))::int
) AS b(i)
GROUP BY b.i
"""


def core_seconds_by_bucket_sql(
    *, start: datetime, bucket: timedelta, count: int, now: datetime, first: int = 0
) -> list[float]:
    """As core_seconds_by_bucket, in one PostgreSQL query: no row of a record comes to Python. Only the
    buckets from `first` on are summed (the others are 0)."""
    if count <= first:
        return [0.0] * count
    sql = _BUCKETS_SQL.format(record=Record._meta.db_table, hold=Hold._meta.db_table)
    params: dict[str, Any] = {"start": start, "now": now, "bucket": bucket, "count": count, "first": first}
    params["bucket_s"] = bucket.total_seconds()
    seconds = [0.0] * count
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for i, total in cursor.fetchall():
            if 0 <= i < count and total and total > 0:
                seconds[i] = float(total)
    return seconds

"""The figures pages show of a job (waits, cost, efficiency, timeline) and of the pool beside the submit form."""

import hashlib
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils.dateparse import parse_datetime

from accounting.models import Record
from jobs.models import Job, JobEvent, Outcome, Stage
from pool.models import Node
from pool.nodes import free_capacity

# A job that used less than this share of the cpu time or memory it held asked for too much, when a
# smaller request exists that would have covered its use.
OVER_ASKED_BELOW = 0.5
# Below this many seconds held, start-up weighs too much in a job's cpu share to advise fewer cpus.
EFFICIENCY_AFTER_S = 10
# The least memory a job may ask for (jobs.submit.forms.JobForm): no smaller request is advised.
MEMORY_MIN_MB = 16
# A memory request advised leaves this much room above the peak, rounded up to a request people make.
MEMORY_HEADROOM = 1.2


def state_key(job: Job) -> str:
    """A short key that changes when the job page's live part would (each new usage sample included)."""
    sampled = (job.usage_now or {}).get("at") if isinstance(job.usage_now, dict) else None
    parts = [job.stage, job.outcome, job.cancel_requested, job.queue_position, job.wait_reason, job.expected_start,
             job.attempt, job.held_at, job.started_at, job.finished_at, sampled, job.preempted_by_id]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Figures:
    queue_wait: timedelta | None
    run_time: timedelta | None
    cost: Decimal | None
    cpu_used: float | None = None  # cpu time used / cpu time held, 0..1
    memory_used: float | None = None  # peak memory / memory held, 0..1
    cpu_note: str = ""  # why cpu_used is None, in words ("not measured by its node")
    memory_note: str = ""  # "reached its 64 MB limit" after running out of memory, or why memory_used is None
    cpus_enough: int | None = None  # fewer cpus that would have covered its use: it asked for too many
    memory_enough_mb: int | None = None  # less memory that would have covered its peak: it asked for too much

    @property
    def cpu_over_asked(self) -> bool:
        return self.cpus_enough is not None

    @property
    def memory_over_asked(self) -> bool:
        return self.memory_enough_mb is not None

    @property
    def over_asked(self) -> bool:
        """Asked for more than it used, where a smaller request exists (`advice` names it)."""
        return self.cpu_over_asked or self.memory_over_asked

    @property
    def advice(self) -> str:
        """The smaller request that would have done, in a sentence; "" when there is none."""
        enough = [f"{self.cpus_enough} cpu"] if self.cpu_over_asked else []
        enough += [f"{self.memory_enough_mb} MB"] if self.memory_over_asked else []
        return f"Asked for more than it used: {' and '.join(enough)} would have done." if enough else ""


def figures(job: Job, records: list[Record] | None = None) -> Figures:
    """A job's wait for its first hold, run time, cost (all its attempts) and efficiency (its last attempt)."""
    if records is None:
        records = getattr(job, "record_list", None)
        if records is None:
            records = list(job.records.order_by("sequence"))
    last = records[-1] if records else None
    first_held = records[0].held_at if records else job.held_at
    return Figures(
        queue_wait=first_held - job.submitted_at if first_held else None,
        run_time=job.run_time,
        cost=sum((r.cost for r in records), Decimal(0)) if records else None,
        **(efficiency(last) if last is not None else {}),
    )


def efficiency(record: Record) -> dict[str, Any]:
    """What a hold's job used of the cpu time and memory it held (as the API gives them), and the smaller request
    that would have done: only one the form takes, and less memory never to a job that ran out of it."""
    cpu, memory = record.cpu_efficiency(), record.memory_efficiency()
    used: dict[str, Any] = {"cpu_used": None, "memory_used": None}
    if cpu is None:
        used["cpu_note"] = "not measured by its node" if not record.measured else "not held"
    else:
        used["cpu_used"] = float(cpu)
        cores = cpu * record.cpus  # the cores it kept busy, on average
        enough = max(1, math.ceil(round(cores, 6)))
        if record.held_seconds >= EFFICIENCY_AFTER_S and cpu < Decimal(OVER_ASKED_BELOW) and enough < record.cpus:
            used["cpus_enough"] = enough
    if memory is not None:
        used["memory_used"] = float(memory)
    if record.outcome == Outcome.OUT_OF_MEMORY:
        # What the cgroup last read may be short of the limit the kernel held it to: the page says so.
        used["memory_note"] = f"reached its {record.memory_mb} MB limit"
    elif memory is None:
        used["memory_note"] = "not measured by its node"
    else:
        assert record.memory_peak_mb is not None
        enough_mb = memory_request_for(record.memory_peak_mb)
        if memory < Decimal(OVER_ASKED_BELOW) and enough_mb < record.memory_mb:
            used["memory_enough_mb"] = enough_mb
    return used


def memory_request_for(peak_mb: int) -> int:
    """The request that covers a peak with room to spare, rounded up to 2ⁿ or 1.5 × 2ⁿ MB (256, 384, 512…),
    never below the form's least."""
    wanted = max(peak_mb * MEMORY_HEADROOM, MEMORY_MIN_MB)
    power = 2 ** math.floor(math.log2(wanted))
    return next(int(step) for step in (power, power * 1.5, power * 2) if step >= wanted)


def with_row_figures(jobs: list[Job]) -> list[Job]:
    """A page of a list with each job's `first_held_at` and `records_cost`, read in one query after paging: as
    annotations of the list's query, PostgreSQL computed them for every row a deep page's OFFSET skips."""
    records = Record.objects.filter(job=OuterRef("pk")).order_by()
    first = records.order_by("sequence").values("held_at")[:1]
    spent = records.values("job").annotate(total=Sum("cost")).values("total")
    rows = Job.objects.filter(pk__in=[job.pk for job in jobs]).annotate(
        first=Coalesce(Subquery(first), "held_at"), spent=Subquery(spent)
    )
    found = {pk: (first, spent) for pk, first, spent in rows.values_list("pk", "first", "spent")}
    for job in jobs:
        job.first_held_at, job.records_cost = found.get(job.pk, (None, None))  # type: ignore[attr-defined]
    return jobs


@dataclass(frozen=True)
class Step:
    """One of the five steps on the job page: when it was reached, how long it took, since when it is under way."""

    step: str
    at: datetime | None
    took: timedelta | None = None
    took_words: str = ""
    since: datetime | None = None
    ended_here: bool = False


def timeline(job: Job, history: list[JobEvent]) -> list[Step]:
    """The five steps of the job's current attempt, each with its own duration; a retried attempt starts when it
    went back to the queue, as its history says."""
    requeued = next((e.at for e in reversed(history) if e.stage == Stage.SUBMIT), None)
    began = job.submitted_at if job.attempt == 1 else requeued
    ended = ended_at(job)

    def span(start: datetime | None, end: datetime | None) -> timedelta | None:
        return end - start if start and end else None

    def running(stage: str, start: datetime | None, end: datetime | None) -> datetime | None:
        return start if job.stage == stage and end is None else None

    return [
        Step(Stage.SUBMIT, began, ended_here=ended == Stage.SUBMIT),
        Step(Stage.RENT, job.held_at, span(began, job.held_at), "queue wait", running(Stage.SUBMIT, began, job.held_at),
             ended_here=ended == Stage.RENT),
        Step(Stage.RUN, job.started_at, span(job.started_at, job.finished_at), "run time",
             running(Stage.RUN, job.started_at, job.finished_at), ended_here=ended == Stage.RUN),
        Step(Stage.OUTPUT, job.finished_at, span(job.finished_at, job.released_at), "collection",
             running(Stage.OUTPUT, job.finished_at, job.released_at), ended_here=ended == Stage.OUTPUT),
        Step(Stage.RELEASE, job.released_at, span(began, job.released_at), "in all"),
    ]  # fmt: skip


def ended_at(job: Job) -> str | None:
    """The step a released job that did not succeed ended at (OUTPUT: a run that exited 0 failed by its outputs)."""
    if not job.is_released or job.outcome in ("", Outcome.SUCCEEDED):
        return None
    if job.held_at is None:
        return Stage.RENT
    if job.finished_at is not None and job.outcome == Outcome.FAILED and job.exit_code == 0:
        return Stage.OUTPUT
    return Stage.RUN


@dataclass(frozen=True)
class Running:
    """A running job's clock against its time limit, and what its node last sampled of its container."""

    elapsed: timedelta
    limit: timedelta
    cpu_percent: float | None = None  # 100 a core
    memory_mb: float | None = None
    sampled_at: datetime | None = None
    sampled_ago: timedelta | None = None

    @property
    def remaining(self) -> timedelta:
        return max(self.limit - self.elapsed, timedelta(0))

    @property
    def elapsed_s(self) -> int:
        return int(self.elapsed.total_seconds())

    @property
    def remaining_s(self) -> int:
        return int(self.remaining.total_seconds())

    @property
    def sampled_s(self) -> int | None:
        return int(self.sampled_ago.total_seconds()) if self.sampled_ago is not None else None

    @property
    def share(self) -> float:
        """The part of the time limit used, 0..1."""
        return min(self.elapsed / self.limit, 1.0) if self.limit else 1.0


def running(job: Job, now: datetime) -> Running | None:
    """The clock of a job whose run has started and not finished, and its last readable usage sample."""
    if job.started_at is None or job.finished_at is not None or job.is_released:
        return None
    clock = Running(elapsed=max(now - job.started_at, timedelta(0)), limit=timedelta(seconds=job.time_limit_s))
    sample = job.usage_now if isinstance(job.usage_now, dict) else {}
    at = parse_datetime(sample["at"]) if isinstance(sample.get("at"), str) else None
    if at is None or not isinstance(sample.get("cpu_percent"), int | float):
        return clock
    return replace(clock, cpu_percent=float(sample["cpu_percent"]), memory_mb=sample.get("memory_mb"), sampled_at=at,
                   sampled_ago=max(now - at, timedelta(0)))  # fmt: skip


def pool_now() -> dict[str, Any]:
    """The largest node, and the most a node can give now."""
    nodes = [n for n in Node.objects.all() if n.state == Node.State.ACTIVE] or list(Node.objects.all())
    if not nodes:
        return {}
    free = free_capacity(nodes).values()
    return {
        "largest": {"cpus": max(n.cpus for n in nodes), "memory_mb": max(n.memory_mb for n in nodes),
                    "gpus": max(n.gpus for n in nodes)},
        "free": {"cpus": max(len(f.cpu_ids) for f in free), "memory_mb": max(f.memory_mb for f in free),
                 "gpus": max(len(f.gpu_ids) for f in free)},
    }  # fmt: skip

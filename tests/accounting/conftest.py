"""Released jobs with their records, made through jobs.lifecycle.actions as a node's worker would."""

from datetime import UTC, datetime, timedelta

import pytest

from accounting.meter import Usage
from accounting.models import Record
from jobs.lifecycle.actions import hold
from jobs.models import Outcome
from pool.nodes import Capacity, register
from pool.placement.types import Placement
from tests.factories import run_to_release, submit_job

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def nodes(db):
    capacity = Capacity(cpu_ids=list(range(8)), memory_mb=16384, gpu_ids=["GPU-0", "GPU-1"])
    return {name: register(name, capacity, now=NOW) for name in ("n1", "n2")}


@pytest.fixture
def released(nodes, django_capture_on_commit_callbacks):
    """released(user, team, ...) -> the record of a job held on `node` at `held_at` and released
    `held_for` later as `outcome`; what the release does once it commits is done (its head is
    appended to the test's heads file)."""

    def released(
        user,
        team,
        *,
        node: str = "n1",
        held_at: datetime = NOW,
        held_for: timedelta = timedelta(hours=1),
        outcome: str = Outcome.SUCCEEDED,
        usage: Usage | None = None,
        **request,
    ) -> Record:
        # The meter never counts a hold past its time limit and the overhead: a job held this long had
        # a time limit at least as long.
        request.setdefault("time_limit_s", max(30, int(held_for.total_seconds())))
        job = submit_job(user, team, **request)
        on = nodes[node]
        cores, gpus = on.cpu_ids[: job.cpus], on.gpu_ids[: job.gpus]
        with django_capture_on_commit_callbacks(execute=True):  # the test's transaction never commits
            hold([Placement(job.pk, job.attempt, on, cores, gpus, job.memory_mb)], now=held_at)
            run_to_release(job, outcome=outcome, reason=f"{outcome} in a test", now=held_at + held_for, usage=usage)
        return Record.objects.get(job=job)

    return released


@pytest.fixture
def chain(released, member, teammate, outsider, team, other_team) -> list[Record]:
    """Three records of two teams, on two nodes."""
    return [
        released(member, team, held_at=NOW, outcome=Outcome.SUCCEEDED),
        released(teammate, team, held_at=NOW + timedelta(hours=1), outcome=Outcome.FAILED, cpus=2),
        released(
            outsider, other_team, node="n2", held_at=NOW + timedelta(hours=2), outcome=Outcome.TIMED_OUT, gpus=1,
            usage=Usage(cpu_seconds=12.5, memory_peak_mb=512),
        ),
    ]  # fmt: skip

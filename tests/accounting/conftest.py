"""Released jobs with their records, made through the lifecycle as a node's worker would."""

from datetime import UTC, datetime, timedelta

import pytest

from accounting.meter import Usage
from accounting.models import Record
from jobs.lifecycle import release
from jobs.models import Outcome
from pool.holds import hold_for
from pool.nodes import Capacity, register
from tests.factories import submit_job

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def nodes(db):
    capacity = Capacity(cpu_ids=list(range(8)), memory_mb=16384, gpu_ids=["GPU-0", "GPU-1"])
    return {name: register(name, capacity, now=NOW) for name in ("n1", "n2")}


@pytest.fixture
def released(nodes):
    """released(user, team, ...) -> the record of a job held on `node` at `held_at` and released
    `held_for` later as `outcome`."""

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
        job = submit_job(user, team, **request)
        on = nodes[node]
        hold_for(job, on, cpu_set=on.cpu_ids[: job.cpus], gpu_ids=on.gpu_ids[: job.gpus], now=held_at)
        release(job, outcome=outcome, reason=f"{outcome} in a test", now=held_at + held_for, usage=usage)
        return Record.objects.get(job=job)

    return released

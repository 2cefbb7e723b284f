from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.meter import Usage
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome
from tests.factories import RuntimeImageFactory, run_to_release, submit_job


def released_job(user, team, *, name: str, outcome: str = Outcome.SUCCEEDED, held_for: timedelta = timedelta(hours=1),
                 cpus: int = 1, exit_code: int | None = 0, reason: str = "",
                 ago: timedelta = timedelta(0)) -> Job:  # fmt: skip
    """A job held for `held_for` and released `ago` (now by default) with `outcome`, through the domain's actions."""
    time_limit_s = max(30, int(held_for.total_seconds()))  # the meter never counts past the time limit
    job = submit_job(user, team, name=name, cpus=cpus, command=["python3", "/data/train.py"], time_limit_s=time_limit_s)
    schedule_pass(now=timezone.now() - ago - held_for)
    job.refresh_from_db()
    assert job.stage == "rent", job.stage
    return run_to_release(job, now=timezone.now() - ago, outcome=outcome, exit_code=exit_code, reason=reason,
                          usage=Usage(cpu_seconds=60.0, memory_peak_mb=40))  # fmt: skip


@pytest.fixture
def image(db):
    return RuntimeImageFactory()

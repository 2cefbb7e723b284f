"""Numbers on the job pages written as every page writes them (core.formats): a record's held and CPU time as
durations, a template's cores counted, the placement's reasons counted."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.meter import Usage
from jobs.models import Outcome
from pool.placement.reasons import plural
from tests.factories import ended_job


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def test_the_record_says_its_held_and_cpu_time_as_durations(me, member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.OUT_OF_MEMORY, at=timezone.now() - timedelta(minutes=1),
                    usage=Usage(cpu_seconds=165.857, memory_peak_mb=10), name="numbers")  # fmt: skip

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    assert "<dt>CPU time</dt><dd>2 m 46 s · peak memory 10 MB</dd>" in page  # not 165.857000 s
    assert "(10 m 00 s held)</dd>" in page  # held for its 10-minute run, not 600.000000 s


def test_a_reason_counts_one_core_as_one():
    assert plural(1, "core") == "1 core" and plural(2, "core") == "2 cores" and plural(0, "gpu") == "0 gpus"

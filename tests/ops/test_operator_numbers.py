"""/operator/'s figures written as every page writes them (core.formats): counts with their plural, the time
held so far, money with its currency, core-hours to two places, outcomes in words."""

import pytest
from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Outcome
from pool.nodes import Capacity, register
from tests.factories import submit_job
from tests.ops.conftest import released_job


@pytest.fixture
def node(db):
    return register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=timezone.now())


def test_the_panels_numbers_are_written_for_people(client, operator, member, team, node, image):
    client.force_login(operator)
    released_job(member, team, name="ran out", outcome=Outcome.OUT_OF_MEMORY, exit_code=137)  # held 1 h
    submit_job(member, team, image=image, name="holding one", cpus=1, memory_mb=64)
    schedule_pass(now=timezone.now())

    page = client.get("/operator/").content.decode()

    assert "1 core · 64 MB" in page and "1 cores" not in page
    assert ">out of memory</span>" in page and ">out_of_memory<" not in page
    assert '<td class="nowrap">1.00 core-hours</td>' in page  # the team's 30 days
    assert " EUR</td>" in page  # the cost so far and the team's 30 days, with their currency
    assert " s</time>" in page  # the time held so far, as a duration

"""One efficiency (Record.cpu_efficiency, memory_efficiency): the job page says what the records API says,
for a job that ran out of memory and for a job held under a second, in worked numbers."""

from datetime import timedelta

from django.urls import reverse

from accounting.meter import Usage
from jobs.models import Outcome

RECORDS = "/api/v1/accounting/records/"


def page_and_api(client, api, member, record) -> tuple[str, dict]:
    client.force_login(member)
    page = client.get(reverse("jobs:detail", kwargs={"job_id": record.job_id})).content.decode()
    [row] = [r for r in api.get(RECORDS).json()["results"] if r["job"] == str(record.job_id)]
    return page, row


def test_an_out_of_memory_job_has_the_same_efficiency_on_its_page_and_in_the_api(client, api, member, team, released):
    # 64 MB held, its cgroup last read 50 MB: 50 / 64 = 0.78125; 30 s of cpu in 60 s on 1 cpu: 0.5.
    record = released(
        member, team, cpus=1, memory_mb=64, held_for=timedelta(seconds=60), outcome=Outcome.OUT_OF_MEMORY,
        usage=Usage(cpu_seconds=30.0, memory_peak_mb=50),
    )  # fmt: skip

    page, row = page_and_api(client, api, member, record)

    assert (row["cpu_efficiency"], row["memory_efficiency"]) == ("0.5000", "0.7813")
    assert "cpu used/held 50 % · peak memory/held 78.1 % (reached its 64 MB limit)" in page
    assert "would have done" not in page  # never told to ask for less memory than it ran out of


def test_a_job_held_under_a_second_has_the_same_efficiency_on_its_page_and_in_the_api(
    client, api, member, team, released
):
    # 0.1 s of cpu in 0.4 s on 2 cpus: 0.1 / 0.8 = 0.125; a 5 MB peak of 64 MB: 0.078125.
    record = released(
        member, team, cpus=2, memory_mb=64, held_for=timedelta(milliseconds=400),
        usage=Usage(cpu_seconds=0.1, memory_peak_mb=5),
    )  # fmt: skip

    page, row = page_and_api(client, api, member, record)

    assert (row["held_seconds"], row["cpu_efficiency"], row["memory_efficiency"]) == ("0.400", "0.1250", "0.0781")
    assert "cpu used/held 12.5 % · peak memory/held 7.8 %" in page


def test_a_node_that_read_nothing_gives_no_efficiency_on_the_page_nor_in_the_api(client, api, member, team, released):
    record = released(member, team, usage=Usage(cpu_seconds=0.0, memory_peak_mb=None))

    page, row = page_and_api(client, api, member, record)

    assert (row["cpu_efficiency"], row["memory_efficiency"]) == (None, None)
    assert "cpu used/held not measured by its node · peak memory/held not measured by its node" in page

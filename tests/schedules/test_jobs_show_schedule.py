"""Jobs show the schedule that made them: the job API's `schedule`, the job's and the array's pages."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from jobs.models import Job, JobArray
from schedules.models import RunStatus, ScheduleRun
from schedules.submitting import submit_run
from tests.factories import RuntimeImageFactory, schedule_of, submit_job

AT = datetime(2026, 3, 2, 1, 0, tzinfo=UTC)
JOB = {"name": "nightly", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 60}


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def run_of(schedule, made) -> ScheduleRun:
    link = {"array": made} if isinstance(made, JobArray) else {"job": made}
    return ScheduleRun.objects.create(schedule=schedule, planned_at=AT, status=RunStatus.SUBMITTED,
                                      recorded_at=timezone.now(), **link)  # fmt: skip


def test_a_scheduled_job_names_its_schedule_and_a_submitted_one_none(api, member, team):
    schedule = schedule_of(member, team, name="nightly report", job=JOB)
    job = submit_run(schedule, planned_at=AT)
    run_of(schedule, job)
    by_hand = submit_job(member, team, name="by hand")

    shown = api.get(f"/api/v1/jobs/{job.pk}/").json()
    listed = {j["id"]: j["schedule"] for j in api.get("/api/v1/jobs/").json()["results"]}

    assert shown["schedule"] == {"id": schedule.pk, "name": "nightly report"}
    assert listed == {str(job.pk): {"id": schedule.pk, "name": "nightly report"}, str(by_hand.pk): None}


def test_an_array_task_names_its_arrays_schedule(api, member, team):
    schedule = schedule_of(member, team, name="sweep", job=JOB | {"indices": "0-2"})
    array = submit_run(schedule, planned_at=AT)
    run_of(schedule, array)

    tasks = api.get(f"/api/v1/arrays/{array.pk}/tasks/").json()["results"]

    assert [t["schedule"] for t in tasks] == [{"id": schedule.pk, "name": "sweep"}] * 3


def test_the_job_page_and_the_array_page_say_which_schedule_submitted_them(client, member, team):
    schedule = schedule_of(member, team, name="nightly report", job=JOB)
    job = submit_run(schedule, planned_at=AT)
    run_of(schedule, job)
    swept = schedule_of(member, team, name="sweep", job=JOB | {"indices": "0-1"})
    array = submit_run(swept, planned_at=AT)
    run_of(swept, array)
    client.force_login(member)

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    task = client.get(f"/jobs/{Job.objects.filter(array=array).first().pk}/").content.decode()
    array_page = client.get(f"/arrays/{array.pk}/").content.decode()

    assert "Submitted by schedule" in page and "nightly report" in page and "2026-03-02 01:00" in page
    assert f'href="/schedules/#schedule-{schedule.pk}"' in page
    assert "Submitted by schedule" in task and "sweep" in task
    assert "Submitted by schedule" in array_page and "sweep" in array_page

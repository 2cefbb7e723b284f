"""Retention: staged data and outputs go N days after release (the team's days, or E31_RETENTION_DAYS);
records and the manifest stay; the job page says when; a pin keeps outputs longer if operators allow."""

from datetime import timedelta

import pytest
from django.core.files.storage import default_storage

from accounting.models import Record
from jobs.lifecycle.actions import hold
from jobs.models import DataFile, OutputFile
from jobs.storage.retention import delete_due
from jobs.storage.store import data_key, output_key
from jobs.tasks import apply_retention
from pool.nodes import Capacity, register
from pool.placement.types import Placement
from tests.factories import run_to_release, store_output, submit_job
from tests.jobs.conftest import T0


def files_exist(job) -> dict[str, bool]:
    names = {f"data/{f.name}": data_key(job.pk, f.name) for f in job.data_files.all()}
    names |= {f"output/{f.path}": output_key(job.pk, f.path) for f in job.output_files.all()}
    return {name: default_storage.exists(key) for name, key in names.items()}


@pytest.fixture
def released_job(member, team, settings):
    """A released job with one data file and one output, released at T0."""
    settings.E31_RETENTION_DAYS = 30
    node = register("n1", Capacity(cpu_ids=[0, 1], memory_mb=1024, gpu_ids=[]), now=T0)

    def make(**changes):
        job = submit_job(member, team, files={"in.csv": "a,b\n"}, **changes)
        hold([Placement(job.pk, job.attempt, node, [0], [], job.memory_mb)], now=T0)
        job.refresh_from_db()
        store_output(job, "model.bin", b"weights")
        run_to_release(job, now=T0 + timedelta(minutes=5))
        job.refresh_from_db()
        return job

    return make


def test_files_are_deleted_after_the_retention_days_and_the_manifest_and_record_stay(released_job):
    job = released_job()
    released = job.released_at

    assert delete_due(now=released + timedelta(days=29)) == []
    assert files_exist(job) == {"data/in.csv": True, "output/model.bin": True}
    deleted = delete_due(now=released + timedelta(days=30))

    assert [j.pk for j in deleted] == [job.pk]
    assert files_exist(job) == {"data/in.csv": False, "output/model.bin": False}
    assert list(DataFile.objects.filter(job=job).values_list("name", "size")) == [("in.csv", 4)]
    assert list(OutputFile.objects.filter(job=job).values_list("path", "sha256")) == [
        ("model.bin", OutputFile.objects.get(job=job).sha256)
    ]
    assert Record.objects.filter(job=job).count() == 1
    job.refresh_from_db()
    assert job.files_deleted_at == released + timedelta(days=30)
    assert delete_due(now=released + timedelta(days=60)) == []  # once


def test_a_teams_own_retention_days_apply(released_job, team):
    team.retention_days = 2
    team.save()
    job = released_job()

    assert [j.pk for j in delete_due(now=job.released_at + timedelta(days=2))] == [job.pk]


def test_a_pinned_job_keeps_its_outputs_longer(released_job, team, client, member):
    team.pin_days = 60
    team.save()
    job, other = released_job(), released_job()
    client.force_login(member)

    response = client.post(f"/jobs/{job.pk}/pin/")
    deleted = delete_due(now=job.released_at + timedelta(days=31))

    assert response.status_code == 302
    assert [j.pk for j in deleted] == [other.pk]
    assert default_storage.exists(output_key(job.pk, "model.bin"))
    assert [j.pk for j in delete_due(now=job.released_at + timedelta(days=91))] == [job.pk]


def test_pinning_is_refused_unless_operators_allow_it(released_job, client, member):
    job = released_job()
    client.force_login(member)

    response = client.post(f"/jobs/{job.pk}/pin/", follow=True)

    job.refresh_from_db()
    assert job.pinned_until is None and "have not allowed this team to pin" in response.content.decode()


def test_an_outsider_cannot_pin(released_job, client, outsider, team):
    team.pin_days = 60
    team.save()
    job = released_job()
    client.force_login(outsider)

    assert client.post(f"/jobs/{job.pk}/pin/").status_code == 404
    assert client.get(f"/jobs/{job.pk}/pin/").status_code in (404, 405)


def test_the_job_page_says_when_the_files_will_be_and_were_deleted(released_job, client, member):
    job = released_job()
    client.force_login(member)

    before = client.get(f"/jobs/{job.pk}/").content.decode()
    delete_due(now=job.released_at + timedelta(days=30))
    after = client.get(f"/jobs/{job.pk}/").content.decode()

    when = (job.released_at + timedelta(days=30)).strftime("%Y-%m-%d %H:%M")
    assert "will be deleted on or after" in before and when in before
    assert "were deleted on" in after and when in after and "model.bin" in after  # the manifest is still listed


def test_the_beat_task_applies_retention(released_job, settings, monkeypatch):
    job = released_job()
    monkeypatch.setattr("jobs.tasks.timezone.now", lambda: job.released_at + timedelta(days=30))

    assert apply_retention() == 1
    assert "retention" in settings.CELERY_BEAT_SCHEDULE and files_exist(job)["output/model.bin"] is False


def test_the_api_pins_when_allowed_and_says_when_files_go(released_job, team, api, outsider_api):
    job = released_job()
    refused = api.post(f"/api/v1/jobs/{job.pk}/pin/")
    team.pin_days = 10
    team.save()

    pinned = api.post(f"/api/v1/jobs/{job.pk}/pin/")
    delete_due(now=job.released_at + timedelta(days=41))
    shown = api.get(f"/api/v1/jobs/{job.pk}/").json()

    assert refused.status_code == 409 and "not allowed" in refused.json()["detail"]
    assert pinned.status_code == 200 and pinned.json()["pinned_until"] is not None
    assert shown["files_deleted_at"] is not None
    assert outsider_api.post(f"/api/v1/jobs/{job.pk}/pin/").status_code == 404


def test_outputs_zip_after_retention_answers_410_saying_when_not_an_empty_reply(released_job, client, member):
    job = released_job()
    client.force_login(member)
    before = client.get(f"/jobs/{job.pk}/outputs.zip")
    delete_due(now=job.released_at + timedelta(days=30))

    after = client.get(f"/jobs/{job.pk}/outputs.zip")

    when = (job.released_at + timedelta(days=30)).strftime("%Y-%m-%d %H:%M")
    assert before.status_code == 200 and before.streaming
    assert after.status_code == 410 and not after.streaming and after["Content-Type"].startswith("text/html")
    assert "were deleted on" in after.content.decode() and when in after.content.decode()


def test_an_outsider_gets_404_on_a_deleted_jobs_outputs_zip(released_job, client, outsider):
    job = released_job()
    delete_due(now=job.released_at + timedelta(days=30))
    client.force_login(outsider)

    assert client.get(f"/jobs/{job.pk}/outputs.zip").status_code == 404


def test_the_job_page_stops_linking_the_outputs_once_they_are_deleted(released_job, client, member):
    job = released_job()
    client.force_login(member)

    before = client.get(f"/jobs/{job.pk}/").content.decode()
    delete_due(now=job.released_at + timedelta(days=30))
    after = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/jobs/{job.pk}/live/").content.decode()

    when = (job.released_at + timedelta(days=30)).strftime("%Y-%m-%d %H:%M")
    assert f"/jobs/{job.pk}/outputs.zip" in before and f"/jobs/{job.pk}/outputs/model.bin" in before
    for page in (after, live):
        assert "outputs.zip" not in page and f"/jobs/{job.pk}/outputs/model.bin" not in page
        assert "model.bin" in page  # still listed, with its size and sha256
        outputs_card = page[page.index(">Outputs</h2>") :].split("</section>")[0]
        assert "files deleted on" in outputs_card and when in outputs_card

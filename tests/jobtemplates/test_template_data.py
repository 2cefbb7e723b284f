"""Templates carry their data: a job saved as a template keeps its data files, stored once for the team (a blob
by sha256) and named by every run rather than copied; the template page attaches and removes files with a
job's limits; a command naming a /data/ file the template lacks warns; the bytes leave the store when nothing
names them (template deleted, file removed, retention of the jobs that named them)."""

import hashlib
from datetime import timedelta

import psycopg
import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import timezone

from accounting.models import StoreQuota
from accounting.store_quotas import stored_bytes
from jobs.lifecycle.actions import hold
from jobs.lifecycle.inputs import staged_files
from jobs.models import DataFile, Job, StoredBlob
from jobs.storage import blobs
from jobs.storage.quotas import store_standings, store_used
from jobs.storage.retention import delete_due
from jobs.storage.store import blob_key, data_key
from jobs.submit.forms import JobForm
from jobtemplates.files import remove
from jobtemplates.forms import TemplateRunForm
from jobtemplates.models import JobTemplate, TemplateFile
from pool.nodes import Capacity, register
from pool.placement.types import Placement
from teams.models import Membership
from tests.factories import RuntimeImageFactory, run_to_release, submit_job
from tests.jobs.conftest import T0
from worker.scratch import Scratch

SCRIPT = b"print('hello from the template')\n"


@pytest.fixture
def image(db):
    return RuntimeImageFactory(name="python", reference="e31/python:3", description="Python 3")


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def saved(me, member, team, image):
    """A template saved from a job running python3 /data/job.py with that file."""
    job = submit_job(
        member, team, image=image, name="hello", command=["python3", "/data/job.py"], files={"job.py": SCRIPT}
    )
    me.post(f"/jobs/{job.pk}/save-template/")
    return JobTemplate.objects.get()


def run(me, template, files=(), **fields):
    data = {"name": "from the template", "cpus": 1, "memory_mb": 256, "gpus": 0, "time_limit_s": 600, **fields}
    if files:
        data["data"] = list(files)
    return me.post(f"/templates/{template.pk}/", data)


def attach(me, template, *files):
    return me.post(f"/templates/{template.pk}/files/", {"attach-data": list(files)})


def blob_exists(blob: StoredBlob) -> bool:
    return default_storage.exists(blob.key)


def test_a_job_saved_as_a_template_keeps_its_data_file_stored_once(me, member, team, saved):
    kept = saved.files.select_related("blob").get()

    assert (kept.name, kept.blob.sha256, kept.blob.size) == ("job.py", hashlib.sha256(SCRIPT).hexdigest(), len(SCRIPT))
    assert kept.blob.team == team and blob_exists(kept.blob)
    page = me.get(f"/templates/{saved.pk}/").content.decode()
    assert "/data/job.py" in page and kept.blob.sha256 in page
    assert 'id="missing-data"' not in page  # the command's file is there
    assert "· 1 data file</p>" in me.get("/templates/").content.decode()


def test_a_run_names_the_templates_file_and_copies_nothing(me, saved, local_node):
    response = run(me, saved)

    assert response.status_code == 302, response.content.decode()
    job = Job.objects.get(name="from the template")
    data = job.data_files.get()
    assert (data.name, data.sha256, data.size, data.blob) == (
        "job.py",
        saved.files.get().blob.sha256,
        len(SCRIPT),
        saved.files.get().blob,
    )
    assert not default_storage.exists(data_key(job.pk, "job.py"))  # no copy under the job
    assert data.stored_key == saved.files.get().blob.key
    answer = me.get(f"/api/v1/jobs/{job.pk}/").json()
    assert answer["data"] == [{"name": "job.py", "size": len(SCRIPT), "sha256": hashlib.sha256(SCRIPT).hexdigest()}]


def test_the_node_stages_a_templates_file_at_its_name(me, saved, local_node, settings, tmp_path):
    run(me, saved)
    job = Job.objects.get(name="from the template")
    scratch = Scratch(job.pk, uid=0)

    scratch.prepare(staged_files(job))

    assert (scratch.data / "job.py").read_bytes() == SCRIPT
    scratch.remove()


def test_a_file_uploaded_with_the_run_wins_over_the_templates_of_that_name(me, saved, local_node):
    mine = b"print('mine')\n"

    response = run(me, saved, [SimpleUploadedFile("job.py", mine), SimpleUploadedFile("extra.txt", b"x")])

    assert response.status_code == 302, response.content.decode()
    job = Job.objects.get(name="from the template")
    files = {f.name: f for f in job.data_files.all()}
    assert set(files) == {"job.py", "extra.txt"}
    assert files["job.py"].blob is None and files["job.py"].sha256 == hashlib.sha256(mine).hexdigest()
    assert default_storage.open(data_key(job.pk, "job.py")).read() == mine


def test_runs_count_once_in_the_store_quota(me, team, saved, local_node):
    before = store_used(team)
    for n in range(3):
        run(me, saved, name=f"run {n}")

    assert Job.objects.filter(name__startswith="run ").count() == 3
    assert store_used(team) == before  # the blob is counted once, not per run
    assert [s.used for s in store_standings([team], now=timezone.now())] == [before]


def test_saving_the_same_job_twice_stores_its_bytes_once(me, member, team, image, saved):
    job = Job.objects.get(name="hello")
    me.post(f"/jobs/{job.pk}/save-template/", {"name": "again"})

    assert TemplateFile.objects.count() == 2 and StoredBlob.objects.count() == 1


def test_a_member_attaches_and_replaces_a_file_of_the_same_name(me, team, saved):
    old = saved.files.get().blob

    response = attach(me, saved, SimpleUploadedFile("job.py", b"print(2)\n"), SimpleUploadedFile("../in put.csv", b"a"))

    assert response.status_code == 302
    files = {f.name: f.blob for f in saved.files.select_related("blob")}
    assert set(files) == {"job.py", "in_put.csv"}  # named as a job's data files are
    assert files["job.py"].sha256 == hashlib.sha256(b"print(2)\n").hexdigest()
    old.refresh_from_db()
    assert not old.present and not blob_exists(old)  # the replaced bytes were named by nothing else


def test_a_replaced_file_a_queued_run_names_stays_until_that_runs_files_are_deleted(me, team, saved, local_node):
    run(me, saved)
    old = saved.files.get().blob

    attach(me, saved, SimpleUploadedFile("job.py", b"print(2)\n"))

    old.refresh_from_db()
    assert old.present and blob_exists(old)  # the queued job stages it yet


def test_a_bad_name_is_refused_as_a_jobs_data_name(me, saved):
    response = attach(me, saved, SimpleUploadedFile("...", b"x"))

    assert response.status_code == 400
    assert "not a usable file name" in response.content.decode()
    assert list(saved.files.values_list("name", flat=True)) == ["job.py"]


def test_an_attachment_over_the_per_file_limit_is_413(me, saved, settings):
    settings.E31_UPLOAD_FILE_MAX_BYTES = 1024

    response = attach(me, saved, SimpleUploadedFile("big.bin", b"x" * 4096))

    assert response.status_code == 413
    assert "over the per-file limit" in response.content.decode()
    assert not saved.files.filter(name="big.bin").exists()


def test_an_attachment_declared_over_the_limit_is_refused_unread(me, saved, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 1024

    response = me.post(
        f"/templates/{saved.pk}/files/", data=b"x" * 10, content_type="multipart/form-data; boundary=b",
        CONTENT_LENGTH=str(100 * 1024 * 1024),
    )  # fmt: skip

    assert response.status_code == 413 and "The upload is too large" in response.content.decode()


def test_an_attachment_over_the_teams_store_quota_is_refused(me, team, saved):
    now = timezone.now()
    StoreQuota.objects.create(team=team, quota_bytes=store_used(team) + 4096, effective_from=now, created_at=now)

    response = attach(me, saved, SimpleUploadedFile("big.bin", b"x" * 8192))

    assert response.status_code == 413
    assert "over the store quota of team red" in response.content.decode()
    assert not saved.files.filter(name="big.bin").exists()
    assert not StoredBlob.objects.filter(present=True, size=8192).exists()
    assert not default_storage.exists(blob_key(team.pk, hashlib.sha256(b"x" * 8192).hexdigest()))  # nor its bytes


def team_lockable(team) -> bool:
    """Whether another submission of the team could take its row lock now, from a connection of its own."""
    with psycopg.connect(**connection.get_connection_params()) as other:
        try:
            other.execute("SELECT 1 FROM teams_team WHERE id = %s FOR UPDATE NOWAIT", [team.pk])
        except psycopg.errors.LockNotAvailable:
            return False
    return True


@pytest.fixture
def writes(transactional_db, team, monkeypatch):
    """Each blob written, as whether the team's row could be locked by another submission meanwhile."""
    seen = []
    save_blob = blobs.save_blob
    monkeypatch.setattr(blobs, "save_blob", lambda *args: seen.append(team_lockable(team)) or save_blob(*args))
    return seen


def test_an_attachment_writes_its_bytes_before_it_takes_its_teams_lock(writes, me, saved):
    # The team's row lock serialises its submissions: writing a slow upload under it would make them queue.
    writes.clear()

    assert attach(me, saved, SimpleUploadedFile("more.csv", b"1,2\n")).status_code == 302

    assert writes == [True]


def test_saving_as_a_template_writes_its_bytes_before_it_takes_its_teams_lock(writes, me, member, team, image):
    job = submit_job(member, team, image=image, name="hello", files={"job.py": SCRIPT})

    assert me.post(f"/jobs/{job.pk}/save-template/").status_code == 302

    assert writes == [True] and blob_exists(JobTemplate.objects.get().files.get().blob)


def test_a_member_removes_a_file_and_its_bytes_go(me, saved):
    blob = saved.files.get().blob

    response = me.post(f"/templates/{saved.pk}/files/job.py/remove/")

    assert response.status_code == 302 and not saved.files.exists()
    blob.refresh_from_db()
    assert not blob.present and not blob_exists(blob)
    page = me.get(f"/templates/{saved.pk}/").content.decode()
    assert 'id="missing-data"' in page and "<code>/data/job.py</code>" in page  # now it warns
    assert me.post(f"/templates/{saved.pk}/files/job.py/remove/").status_code == 404


def test_deleting_the_template_frees_its_bytes(me, saved):
    blob = saved.files.get().blob

    response = me.post(f"/templates/{saved.pk}/delete/")

    assert response.status_code == 302 and not JobTemplate.objects.exists()
    blob.refresh_from_db()
    assert not blob.present and not blob_exists(blob)


def test_deleting_a_template_another_names_keeps_the_bytes(me, member, team, image, saved):
    job = Job.objects.get(name="hello")
    me.post(f"/jobs/{job.pk}/save-template/", {"name": "again"})
    blob = saved.files.get().blob

    me.post(f"/templates/{saved.pk}/delete/")

    blob.refresh_from_db()
    assert blob.present and blob_exists(blob)


def test_retention_of_a_run_keeps_the_templates_bytes_and_frees_them_once_unnamed(me, member, team, saved, settings):
    settings.E31_RETENTION_DAYS = 30
    node = register("n1", Capacity(cpu_ids=[0, 1], memory_mb=1024, gpu_ids=[]), now=T0)
    run(me, saved)
    job = Job.objects.get(name="from the template")
    hold([Placement(job.pk, job.attempt, node, [0], [], job.memory_mb)], now=T0)
    job.refresh_from_db()
    run_to_release(job, now=T0 + timedelta(minutes=5))
    blob = saved.files.get().blob
    me.post(f"/templates/{saved.pk}/delete/")  # the run still names it: kept
    blob.refresh_from_db()
    assert blob.present and blob_exists(blob)

    deleted = delete_due(now=T0 + timedelta(days=31))

    assert job.pk in [j.pk for j in deleted]
    blob.refresh_from_db()
    assert not blob.present and not blob_exists(blob)  # the last job naming it lost its files
    assert DataFile.objects.get(job=job).sha256 == blob.sha256  # the manifest stays


def test_retention_of_a_run_leaves_the_template_whole(me, member, team, saved, settings, local_node):
    settings.E31_RETENTION_DAYS = 30
    node = register("n1", Capacity(cpu_ids=[0, 1], memory_mb=1024, gpu_ids=[]), now=T0)
    run(me, saved)
    job = Job.objects.get(name="from the template")
    hold([Placement(job.pk, job.attempt, node, [0], [], job.memory_mb)], now=T0)
    job.refresh_from_db()
    run_to_release(job, now=T0 + timedelta(minutes=5))

    delete_due(now=T0 + timedelta(days=31))

    blob = saved.files.get().blob
    assert blob.present and default_storage.open(blob.key).read() == SCRIPT
    assert run(me, saved, name="after").status_code == 302


def test_a_job_saved_after_retention_deleted_its_files_warns(me, member, team, image, settings):
    job = submit_job(
        member, team, image=image, name="old", command=["python3", "/data/job.py"], files={"job.py": SCRIPT}
    )
    Job.objects.filter(pk=job.pk).update(files_deleted_at=timezone.now())

    response = me.post(f"/jobs/{job.pk}/save-template/", follow=True)

    page = response.content.decode()
    assert "deleted by retention" in page and 'id="missing-data"' in page
    assert not TemplateFile.objects.exists()


def test_a_job_whose_templates_file_was_freed_meanwhile_is_not_saved_and_says_so(me, saved, local_node):
    run(me, saved)
    job = Job.objects.get(name="from the template")
    StoredBlob.objects.update(present=False)  # retention freed it after the page was read

    response = me.post(f"/jobs/{job.pk}/save-template/", {"name": "second"}, follow=True)

    assert response.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "Not saved: job.py left the store meanwhile, as the job" in response.content.decode()
    assert not JobTemplate.objects.filter(name="second").exists()


def test_a_job_whose_own_file_left_the_store_meanwhile_is_not_saved_and_says_so(me, member, team, image):
    job = submit_job(member, team, image=image, name="hello", files={"job.py": SCRIPT})
    default_storage.delete(data_key(job.pk, "job.py"))  # retention deleted it, not yet marking the job

    response = me.post(f"/jobs/{job.pk}/save-template/", follow=True)

    assert response.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "Not saved: job.py left the store meanwhile, as the job" in response.content.decode()
    assert not JobTemplate.objects.exists()


def test_a_store_that_fails_while_saving_a_job_as_a_template_is_said_so(me, member, team, image, monkeypatch):
    job = submit_job(member, team, image=image, name="hello", files={"job.py": SCRIPT})

    def full(key, content):
        raise OSError(28, "No space left on device", "/srv/store/" + key)

    monkeypatch.setattr(blobs, "save_blob", full)

    response = me.post(f"/jobs/{job.pk}/save-template/", follow=True)

    page = response.content.decode()
    assert response.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "Not saved: the store failed keeping the job" in page and "No space left on device" in page
    assert "/srv/store" not in page
    assert not JobTemplate.objects.exists() and not StoredBlob.objects.filter(present=True).exists()


def test_a_job_run_from_a_template_saves_as_a_template_naming_the_same_blob(me, saved, local_node):
    run(me, saved)
    job = Job.objects.get(name="from the template")

    me.post(f"/jobs/{job.pk}/save-template/", {"name": "second"})

    assert JobTemplate.objects.get(name="second").files.get().blob == saved.files.get().blob
    assert StoredBlob.objects.count() == 1


def resubmit(me, job, **fields):
    return me.post(f"/jobs/{job.pk}/resubmit/", {
        "name": "again", "image": "python", "command": "python3 /data/job.py", "cpus": 1, "memory_mb": 64,
        "gpus": 0, "time_limit_s": 60, "max_retries": 0, "reuse": ["job.py"], **fields,
    })  # fmt: skip


def test_a_resubmit_of_a_run_names_the_templates_file_and_copies_nothing(me, team, saved, local_node):
    run(me, saved)
    job = Job.objects.get(name="from the template")
    blob, used = saved.files.get().blob, store_used(team)

    response = resubmit(me, job)

    assert response.status_code == 302, response.content.decode()
    again = Job.objects.get(name="again")
    assert again.data_files.get().blob_id == blob.pk
    assert default_storage.open(again.data_files.get().stored_key).read() == SCRIPT
    assert not default_storage.exists(data_key(again.pk, "job.py"))  # the bytes are stored once, the blob's
    assert store_used(team) == used


def test_a_resubmit_to_another_team_copies_the_file_its_own_team_keeps(me, member, other_team, saved, local_node):
    Membership.objects.create(team=other_team, user=member)
    run(me, saved)
    job = Job.objects.get(name="from the template")

    assert resubmit(me, job, team="blue").status_code == 302

    copied = Job.objects.get(name="again").data_files.get()
    assert copied.blob is None and default_storage.open(copied.stored_key).read() == SCRIPT
    assert store_used(other_team) == stored_bytes(len(SCRIPT))  # charged to the team it now runs for


def test_a_resubmit_whose_templates_file_was_freed_meanwhile_says_so(me, saved, local_node, monkeypatch):
    run(me, saved)
    job = Job.objects.get(name="from the template")
    real = JobForm.clean

    def clean_then_free(self):
        cleaned = real(self)
        StoredBlob.objects.update(present=False)  # retention freed it between the form's reading and the submit
        return cleaned

    monkeypatch.setattr(JobForm, "clean", clean_then_free)

    response = resubmit(me, job)

    assert "job.py: deleted from the store" in response.content.decode()
    assert not Job.objects.filter(name="again").exists()


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        ("python3 /data/job.py", ["job.py"]),
        ("sh -c 'cat /data/a.csv | wc -l > /output/n; python3 /data/b.py'", ["a.csv", "b.py"]),
        ("python3 -c 'open(\"/data/in.json\").read()'", ["in.json"]),
        ("cat /mnt/data/x /data/ /data/$NAME", []),
        ("ls /data/sub/deeper", ["sub"]),
        ("python3 /data/have.py {arg}", []),
    ],
)
def test_a_command_naming_a_data_file_the_template_lacks_warns(image, command, missing):
    template = JobTemplate.objects.create(name="t", image=image, command=command)

    assert template.missing_data(["have.py"]) == missing


def test_the_warning_shows_on_the_page_of_a_template_without_the_file(me, team, image):
    template = JobTemplate.objects.create(team=team, name="t", image=image, command="python3 /data/job.py")

    page = me.get(f"/templates/{template.pk}/").content.decode()

    assert 'id="missing-data"' in page and "<code>/data/job.py</code>" in page


def test_the_admin_warns_when_a_template_is_saved_without_the_file(client, operator, image):
    client.force_login(operator)

    response = client.post("/admin/jobtemplates/jobtemplate/add/", {
        "name": "t", "image": image.pk, "command": "python3 /data/job.py", "defaults": "{}", "env": "{}",
        "output_patterns": "[]", "cpus": 1, "memory_mb": 256, "gpus": 0, "time_limit_s": 600,
        "max_retries": 0, "retry_on": "[]", "retry_memory_factor": 1.0, "retry_delay_s": 0,
        "files-TOTAL_FORMS": 0, "files-INITIAL_FORMS": 0,
    }, follow=True)  # fmt: skip

    assert "/data/job.py, which the template has no file of" in response.content.decode()


def test_another_teams_template_and_its_files_are_404(client, outsider, saved):
    client.force_login(outsider)

    assert client.get(f"/templates/{saved.pk}/").status_code == 404
    assert attach(client, saved, SimpleUploadedFile("x.txt", b"x")).status_code == 404
    assert client.post(f"/templates/{saved.pk}/files/job.py/remove/").status_code == 404
    assert client.post(f"/templates/{saved.pk}/delete/").status_code == 404
    assert saved.files.count() == 1 and JobTemplate.objects.filter(pk=saved.pk).exists()


def test_an_operators_template_is_changed_by_operators_only(me, image):
    template = JobTemplate.objects.create(name="shared", image=image, command="python3 /data/job.py")

    assert attach(me, template, SimpleUploadedFile("job.py", SCRIPT)).status_code == 403
    assert 'id="attach-form"' not in me.get(f"/templates/{template.pk}/").content.decode()
    assert not template.files.exists()


def test_the_operators_attach_a_file_everyone_runs(client, operator, me, image, local_node):
    template = JobTemplate.objects.create(name="shared", image=image, command="python3 /data/job.py")
    client.force_login(operator)
    assert attach(client, template, SimpleUploadedFile("job.py", SCRIPT)).status_code == 302
    blob = template.files.get().blob
    assert blob.team is None

    assert run(me, template).status_code == 302
    assert Job.objects.get().data_files.get().blob == blob


def test_a_file_removed_after_the_page_was_read_refuses_the_run(me, saved, local_node, monkeypatch):
    real = TemplateRunForm.clean

    def clean_then_remove(self):
        cleaned = real(self)
        remove(self.template, "job.py", by=None, now=timezone.now())  # another member, between reading and submitting
        return cleaned

    monkeypatch.setattr(TemplateRunForm, "clean", clean_then_remove)

    response = run(me, saved)

    assert response.status_code == 409 and "job.py: removed from the template meanwhile" in response.content.decode()
    assert not Job.objects.filter(name="from the template").exists()


def test_stored_bytes_of_a_blob_count_in_whole_blocks(team, saved):
    assert store_used(team) == stored_bytes(len(SCRIPT)) * 2  # the job's own copy and the template's blob

"""The store on a real S3 server (moto on loopback): uploads in parts, staging checked by sha256, outputs,
downloads streamed or presigned, the zip, logs and previews read as byte ranges, retention; and the store
going away mid-transfer."""

import hashlib
import io
import os
import time
import urllib.request
import uuid
import zipfile
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.contrib.messages import get_messages
from django.core.files.storage import default_storage
from django.utils import timezone
from storages.backends.s3 import S3Storage

from jobs.lifecycle.inputs import staged_files
from jobs.models import DataFile, Job, Outcome, OutputFile
from jobs.storage.retention import delete_due
from jobs.storage.store import StoreUnavailable, data_key, delete_outputs, fetch, output_key, save_output
from jobtemplates.models import JobTemplate
from tests.conftest import ROOT
from tests.factories import RuntimeImageFactory, ended_job, store_output, submit_job, upload
from tests.jobs.conftest import collecting, held, running
from tests.jobs.test_api import post_job
from tests.s3 import BUCKET, S3Server
from worker import outputs, runner
from worker.scratch import Scratch, ScratchError

MB = 1024 * 1024


def keys(server: S3Server, prefix: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


def location() -> str:
    return settings.STORAGES["default"]["OPTIONS"]["location"]


def data(size: int) -> bytes:
    return os.urandom(MB) * (size // MB) + os.urandom(size % MB)


@pytest.fixture
def own_s3(settings, tmp_path):
    """An S3 server of this test's own, to kill: the session's serves the other tests."""
    server = S3Server(ROOT / "var" / "log" / f"test-s3-{settings.E31_SANDBOX_NAMESPACE}-own.log").start()
    settings.STORAGES = server.storages(settings.STORAGES, location="own")
    yield server
    server.kill()


def kill_on(server: S3Server, event: str, *, after: int = 0):
    """Kill the server as the store's client is about to send its `after`+1-th `event` (mid-transfer)."""
    seen = []

    def hook(**kwargs):
        seen.append(1)
        if len(seen) > after:
            server.kill()

    default_storage.connection.meta.client.meta.events.register(f"before-send.s3.{event}", hook)
    return seen


# --- uploads ----------------------------------------------------------------------------------------


def test_a_big_upload_goes_to_s3_in_parts_with_its_sha256(api, image, s3_store):
    content = data(20 * MB + 123)

    response = post_job(api, data=[upload("big.bin", content)])

    assert response.status_code == 201, response.content
    job_id = response.json()["id"]
    row = DataFile.objects.get(job_id=job_id)
    assert (row.size, row.sha256) == (len(content), hashlib.sha256(content).hexdigest())
    key = f"{location()}/{data_key(job_id, 'big.bin')}"
    head = s3_store.client().head_object(Bucket=BUCKET, Key=key)
    # A multipart object's ETag names its parts: parts of E31_STORE_MULTIPART_MB, never the file whole.
    assert head["ContentLength"] == len(content) and head["ETag"].strip('"').endswith("-3")


def test_the_store_going_away_mid_upload_is_a_503_and_no_job(api, image, own_s3):
    seen = kill_on(own_s3, "UploadPart", after=1)

    response = post_job(api, data=[upload("big.bin", data(24 * MB))])

    assert len(seen) >= 2, "the server was killed between two parts of the upload"
    assert response.status_code == 503, response.content
    assert response.json()["detail"].startswith("The file store is unavailable (the store failed: ")
    assert response["Retry-After"] == "60"
    assert not Job.objects.exists() and not DataFile.objects.exists()


def test_the_submit_page_says_the_store_is_unavailable(client, member, image, own_s3):
    own_s3.kill()
    client.force_login(member)

    form = {"name": "x", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64", "time_limit_s": "60"}
    response = client.post("/jobs/new/", {**form, "data": [upload("a.txt", b"a")]})

    assert response.status_code == 503
    assert b"The file store is unavailable" in response.content and not Job.objects.exists()


# --- staging ----------------------------------------------------------------------------------------


@pytest.fixture
def scratch_of():
    made = []

    def scratch_of(job) -> Scratch:
        made.append(Scratch(job.pk, uid=os.geteuid()))
        return made[-1]

    yield scratch_of
    for scratch in made:
        scratch.remove()


@pytest.fixture
def staged_job(member, team, local_node):
    # Bigger than the socket buffers between the server and the node: a server killed mid-body cuts it short.
    return submit_job(member, team, image=RuntimeImageFactory(), files={"in.bin": data(32 * MB + 5)})


def test_a_node_stages_the_data_from_s3_checked_by_its_sha256(s3_store, staged_job, scratch_of):
    scratch = scratch_of(staged_job)
    scratch.prepare(staged_files(staged_job))

    row = staged_job.data_files.get()
    assert hashlib.sha256((scratch.data / "in.bin").read_bytes()).hexdigest() == row.sha256


def test_staging_refuses_bytes_other_than_were_uploaded(s3_store, staged_job, scratch_of):
    size = staged_job.data_files.get().size
    key = f"{location()}/{data_key(staged_job.pk, 'in.bin')}"
    s3_store.client().put_object(Bucket=BUCKET, Key=key, Body=b"x" * size)

    with pytest.raises(ScratchError, match=r"^/data/in.bin could not be staged: the store gave other bytes"):
        scratch_of(staged_job).prepare(staged_files(staged_job))


@pytest.mark.parametrize("when", ["before", "while"])
def test_the_store_going_away_at_staging_is_a_scratch_error_naming_it(
    own_s3, staged_job, scratch_of, when, monkeypatch
):
    files = staged_files(staged_job)
    if when == "before":
        own_s3.kill()
    else:  # the first MB is written, then the server dies under the rest of the body
        real = fetch

        def dying(key, target, chunk=MB):
            class Killing(io.RawIOBase):
                def write(self, piece):
                    own_s3.kill()
                    return target.write(piece)

            return real(key, Killing(), chunk)

        monkeypatch.setattr("worker.scratch.fetch", dying)
    # A body cut short raises, or (no length to check it by) ends early and is caught by its size.
    said = r"^/data/in.bin could not be staged: the store (failed: |gave \d+ bytes of its 33554437$)"
    with pytest.raises(ScratchError, match=said):
        scratch_of(staged_job).prepare(files)


# --- outputs and downloads -------------------------------------------------------------------------------


@pytest.fixture
def collecting_job(member, team, local_node):
    return collecting(running(held(submit_job(member, team, image=RuntimeImageFactory()))))


def output_dir(job, files: dict[str, bytes]) -> Scratch:
    scratch = Scratch(job.pk, uid=os.geteuid())
    scratch.output.mkdir(parents=True)
    for name, content in files.items():
        (scratch.output / name).write_bytes(content)
    return scratch


def test_a_node_keeps_its_outputs_in_s3(collecting_job, s3_store):
    scratch = output_dir(collecting_job, {"a.txt": b"a\n", "b.bin": data(9 * MB)})

    outcome, reason, _ = runner.collect(collecting_job, scratch, Outcome.SUCCEEDED, "")

    assert (outcome, reason) == (Outcome.SUCCEEDED, "")
    prefix = f"{location()}/{output_key(collecting_job.pk, '')}"
    assert keys(s3_store, prefix) == [prefix + "a.txt", prefix + "b.bin"]


def test_the_store_going_away_mid_collection_keeps_no_half_written_output(own_s3, collecting_job):
    scratch = output_dir(collecting_job, {"a.txt": b"a\n", "b.bin": data(20 * MB), "c.txt": b"c\n"})
    kill_on(own_s3, "UploadPart", after=1)

    outcome, reason, _ = runner.collect(collecting_job, scratch, Outcome.SUCCEEDED, "")

    assert outcome == Outcome.FAILED
    assert reason.startswith("its outputs could not all be kept, the store failed: ")
    assert reason.endswith(": 2 of 3 not kept, from b.bin on")
    assert list(OutputFile.objects.filter(job=collecting_job).values_list("path", flat=True)) == ["a.txt"]


def test_small_outputs_stream_from_s3_and_big_ones_redirect_to_a_presigned_url(
    api, outsider_api, member, team, local_node, s3_store, settings
):
    settings.E31_PRESIGN_OVER_BYTES = 5 * MB
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    big = data(6 * MB)
    store_output(job, "small.txt", b"small\n")
    store_output(job, "big.html", big)
    url = f"/api/v1/jobs/{job.pk}/outputs/"

    small = api.get(url + "small.txt")
    assert small.status_code == 200 and b"".join(small.streaming_content) == b"small\n"
    assert small["Content-Length"] == "6"
    asked = time.time()
    redirect = api.get(url + "big.html")
    assert redirect.status_code == 302
    location = redirect["Location"]
    assert location.startswith(s3_store.endpoint + "/")
    expires = int(parse_qs(urlsplit(location).query)["Expires"][0])  # valid E31_PRESIGN_EXPIRY_S from now
    assert asked - 1 <= expires - settings.E31_PRESIGN_EXPIRY_S <= time.time() + 1
    with urllib.request.urlopen(location) as answer:  # noqa: S310 (the test's own loopback server)
        assert answer.read() == big
        assert answer.headers["Content-Type"] == "application/octet-stream"
        assert answer.headers["Content-Disposition"] == 'attachment; filename="big.html"'
    # Another team's output is 404 before any URL is made.
    for path in ("big.html", "small.txt"):
        refused = outsider_api.get(url + path)
        assert refused.status_code == 404 and "Location" not in refused


def test_outputs_zip_streams_from_s3(client, member, team, local_node, s3_store):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    big = data(3 * MB + 7)
    store_output(job, "table.csv", b"epoch,loss\n" * 100)
    store_output(job, "nested/model.bin", big)
    client.force_login(member)

    response = client.get(f"/jobs/{job.pk}/outputs.zip")

    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert archive.read("nested/model.bin") == big and archive.testzip() is None


# --- logs and previews: a byte range, never the whole object ---------------------------------------------


def ranges_asked() -> list[str | None]:
    """The Range of each GetObject the store's client sends from now on (None: the object whole)."""
    asked: list[str | None] = []

    def hook(request, **kwargs):
        said = request.headers.get("Range")
        asked.append(said.decode() if isinstance(said, bytes) else said)

    default_storage.connection.meta.client.meta.events.register("before-send.s3.GetObject", hook)
    return asked


LONG_LOG = b"".join(b"line %06d\n" % i for i in range(200_000))  # 12 bytes a line, 2,400,000 in all


@pytest.fixture
def long_log_job(member, team, local_node, s3_store):
    return ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), log=LONG_LOG)


def test_the_job_page_reads_a_sealed_logs_tail_from_s3_as_a_range(client, member, long_log_job):
    client.force_login(member)
    asked = ranges_asked()

    response = client.get(f"/jobs/{long_log_job.pk}/")

    assert response.status_code == 200
    text = response.content.decode()
    # The last 64 KB from a line's start: byte 2,334,468, line 194,540 (194,539 lines of 12 bytes before it).
    assert "The end of the log, from line 194540;" in text and "line 199999\n" in text and "line 194538" not in text
    # The tail is one suffix range; the lines before it are counted (to number the tail's) from the bytes before.
    assert asked == ["bytes=-65536", "bytes=0-2334467"]


def test_the_api_reads_a_sealed_log_from_an_offset_as_a_range(api, long_log_job):
    asked = ranges_asked()

    response = api.get(f"/api/v1/jobs/{long_log_job.pk}/logs/?offset=2399988")

    assert response.status_code == 200
    assert response.content == b"line 199999\n" and response["X-Next-Offset"] == "2400000"
    assert asked == [f"bytes=2399988-{2399988 + MB - 1}"]


def test_a_preview_reads_only_the_start_of_an_output_from_s3(client, member, team, local_node, s3_store):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    store_output(job, "big.txt", b"the first line\n" + data(3 * MB))
    client.force_login(member)
    asked = ranges_asked()

    response = client.get(f"/jobs/{job.pk}/preview/big.txt")

    assert response.status_code == 200
    text = response.content.decode()
    assert "the first line" in text and "The start of the file only; download it for the rest." in text
    assert asked == ["bytes=0-262144"]  # the preview's 256 KB and one byte more, to tell a file cut


# --- the store away under a page or a call: 503 -----------------------------------------------------------

STORE_AWAY = (
    "The file store is unavailable (the store failed: it did not answer); nothing was kept. Try again in a minute."
)


def said_store_away(response) -> bool:
    return response.status_code == 503 and response["Retry-After"] == "60" and STORE_AWAY in response.content.decode()


def test_a_logs_tail_with_the_store_away_is_a_503(client, api, member, team, local_node, own_s3):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), log=b"all it said\n")
    own_s3.kill()
    client.force_login(member)

    assert said_store_away(client.get(f"/jobs/{job.pk}/"))
    assert said_store_away(client.get(f"/jobs/{job.pk}/log/lines/?offset=4"))
    answer = api.get(f"/api/v1/jobs/{job.pk}/logs/?offset=4")
    assert said_store_away(answer) and answer.json() == {"detail": STORE_AWAY}


def test_a_preview_with_the_store_away_is_a_503(client, member, team, local_node, own_s3):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    store_output(job, "notes.txt", b"hello\n")
    own_s3.kill()
    client.force_login(member)

    assert said_store_away(client.get(f"/jobs/{job.pk}/preview/notes.txt"))


@pytest.fixture
def template_on_s3(client, member, team, local_node, own_s3):
    """A template saved from a job with a data file, its blob on the S3 server the test kills."""
    job = submit_job(member, team, image=RuntimeImageFactory(), name="hello", files={"job.py": b"print(1)\n"})
    client.force_login(member)
    assert client.post(f"/jobs/{job.pk}/save-template/").status_code == 302
    return JobTemplate.objects.get()


def test_a_template_run_with_the_store_away_is_a_503_and_no_job(client, template_on_s3, own_s3):
    own_s3.kill()
    run = {"name": "from the template", "cpus": 1, "memory_mb": 256, "gpus": 0, "time_limit_s": 600}

    response = client.post(f"/templates/{template_on_s3.pk}/", {**run, "data": [upload("extra.txt", b"x")]})

    assert said_store_away(response) and not Job.objects.filter(name="from the template").exists()


def test_a_job_saved_as_a_template_with_the_store_away_says_the_store_failed(client, member, team, local_node, own_s3):
    job = submit_job(member, team, image=RuntimeImageFactory(), name="hello", files={"job.py": b"print(1)\n"})
    client.force_login(member)
    own_s3.kill()

    response = client.post(f"/jobs/{job.pk}/save-template/")

    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    said = [str(message) for message in get_messages(response.wsgi_request)]
    assert said == [
        "Not saved: the store failed keeping the job's data files (the store failed: it did not answer); try again."
    ]
    assert not JobTemplate.objects.exists()


def test_a_resubmit_reusing_a_file_with_the_store_away_is_a_503_and_no_job(client, member, team, local_node, own_s3):
    image = RuntimeImageFactory()
    earlier = submit_job(member, team, image=image, name="convert", files={"run.py": b"print(1)"})
    client.force_login(member)
    own_s3.kill()

    response = client.post(f"/jobs/{earlier.pk}/resubmit/", {
        "name": "convert again", "image": image.name, "command": "python3 /data/run.py", "env": "",
        "cpus": "1", "memory_mb": "128", "gpus": "0", "time_limit_s": "2h", "outputs": "", "reuse": ["run.py"],
    })  # fmt: skip

    assert said_store_away(response) and list(Job.objects.all()) == [earlier]


# --- retention ------------------------------------------------------------------------------------------


def test_retention_deletes_a_jobs_data_and_outputs_from_s3(s3_store, member, team, local_node):
    job = submit_job(member, team, image=RuntimeImageFactory(), files={"in.csv": b"1,2\n", "more.csv": b"3\n"})
    released = timezone.now() - timedelta(days=400)
    Job.objects.filter(pk=job.pk).update(stage="release", outcome=Outcome.SUCCEEDED, released_at=released)
    save_output(job.pk, "deep/er/out.txt", io.BytesIO(b"out"))
    other = submit_job(member, team, image=RuntimeImageFactory(), files={"keep.csv": b"k"})
    assert len(keys(s3_store, f"{location()}/jobs/{job.pk}/")) == 3

    assert [j.pk for j in delete_due(now=timezone.now())] == [job.pk]

    assert keys(s3_store, f"{location()}/jobs/{job.pk}/") == []
    assert keys(s3_store, f"{location()}/jobs/{other.pk}/") == [f"{location()}/{data_key(other.pk, 'keep.csv')}"]


def test_retention_with_the_store_away_deletes_nothing_and_tries_again(own_s3, member, team, local_node):
    job = submit_job(member, team, image=RuntimeImageFactory(), files={"in.csv": b"1,2\n"})
    Job.objects.filter(pk=job.pk).update(stage="release", released_at=timezone.now() - timedelta(days=400))
    own_s3.kill()

    with pytest.raises(StoreUnavailable):
        delete_due(now=timezone.now())

    assert Job.objects.get(pk=job.pk).files_deleted_at is None


def test_an_output_a_store_refuses_is_said_in_job_terms(own_s3, collecting_job):
    own_s3.kill()
    scratch = output_dir(collecting_job, {"a.txt": b"a\n"})
    collected = outputs.collect(scratch.output, [], outputs.Limits(MB, MB, 10)).files[0]

    with pytest.raises(StoreUnavailable) as raised:
        outputs.store(collecting_job.pk, collected)

    assert outputs.in_job_terms(raised.value) == "the store failed: it did not answer"


def test_a_store_serving_unsigned_urls_streams_big_outputs_instead(api, member, team, local_node, s3_store, settings):
    settings.STORAGES = s3_store.storages(settings.STORAGES, location="unsigned", querystring_auth=False)
    settings.E31_PRESIGN_OVER_BYTES = 1
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    store_output(job, "big.bin", b"never a URL that does not expire")

    answer = api.get(f"/api/v1/jobs/{job.pk}/outputs/big.bin")

    assert answer.status_code == 200 and b"".join(answer.streaming_content) == b"never a URL that does not expire"


def test_a_delete_the_store_answers_key_by_key_is_not_taken_for_done(s3_store, monkeypatch):
    class Refusing:
        def filter(self, **kwargs):
            return self

        def delete(self):
            return [{"Deleted": [{"Key": "a"}], "Errors": [{"Key": "b", "Code": "AccessDenied"}]}]

    monkeypatch.setattr(S3Storage, "bucket", property(lambda self: type("Bucket", (), {"objects": Refusing()})()))

    with pytest.raises(StoreUnavailable, match=r"it kept 1 of the files \(AccessDenied\)"):
        delete_outputs(uuid.uuid4())

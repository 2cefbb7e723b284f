"""Resubmitting a job: POST /api/v1/jobs/{id}/resubmit/ (happy path, bad input, outsider, wrong method,
idempotency), the fields that link a job and its resubmissions, the job pages' sentences about them, and
the memory proposed for a job that ran out of it."""

import hashlib
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from jobs.lifecycle.resubmits import memory_proposal
from jobs.models import DataFile, Job, Outcome
from jobs.submit.again import declared_fields
from pool.nodes import Capacity, register
from teams.models import Membership
from tests.conftest import api_client_for
from tests.factories import ended_job, submit_job
from tests.jobs.conftest import T0

JOBS = "/api/v1/jobs/"


def text_of(page: str) -> str:
    """What a person reads of a page: its text, tags and extra spaces left out."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


@pytest.fixture
def small_node(db):
    """A pool of one node of 2 cpus, 4096 MB and no gpu."""
    return register("small", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())


@pytest.fixture
def earlier(member, team, image, small_node):
    files = {"train.csv": "a,b\n1,2\n"}
    return submit_job(member, team, image=image, name="nightly", files=files, command="python3 /data/train.py")


def resubmit(client, job, body, **headers):
    return client.post(f"{JOBS}{job.pk}/resubmit/", body, format="json", **headers)


# --- POST /api/v1/jobs/{id}/resubmit/ ------------------------------------------------------------------------


def test_resubmit_makes_a_job_with_the_field_changed_and_the_rest_as_declared(api, earlier):
    response = resubmit(api, earlier, {"memory_mb": 512})

    assert response.status_code == 201
    body = response.json()
    assert body["id"] != str(earlier.pk) and body["resubmitted_from"] == str(earlier.pk)
    assert body["request"] == {"cpus": 1, "memory_mb": 512, "gpus": 0, "time_limit_s": 30}
    assert body["name"] == "nightly" and body["command"] == earlier.command and body["image"] == earlier.image.name
    assert body["resubmissions"] == []
    assert api.get(f"{JOBS}{body['id']}/").json()["resubmitted_from"] == str(earlier.pk)


def test_resubmit_stages_the_earlier_jobs_data_again_without_an_upload(api, earlier):
    body = resubmit(api, earlier, {"cpus": 2}).json()

    sha = hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    assert body["data"] == [{"name": "train.csv", "size": 8, "sha256": sha}]
    assert DataFile.objects.get(job_id=body["id"]).sha256 == sha


def test_resubmit_may_leave_out_a_data_file_of_the_earlier_job(api, earlier):
    body = resubmit(api, earlier, {"reuse": []}).json()

    assert body["data"] == []


def test_resubmit_sent_as_multipart_replaces_a_data_file_by_its_name_and_reuses_the_rest(api, earlier):
    sent = SimpleUploadedFile("train.csv", b"a,b\n3,4\n5,6\n")
    response = api.post(f"{JOBS}{earlier.pk}/resubmit/", {"memory_mb": "256", "data": [sent]}, format="multipart")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["request"]["memory_mb"] == 256 and body["resubmitted_from"] == str(earlier.pk)
    assert body["data"] == [{"name": "train.csv", "size": 12, "sha256": hashlib.sha256(b"a,b\n3,4\n5,6\n").hexdigest()}]


def test_a_resubmit_into_another_team_is_not_linked_so_that_team_never_learns_of_the_first(member, other_team, earlier):
    Membership.objects.create(team=other_team, user=member)
    api = api_client_for(member)

    response = resubmit(api, earlier, {"team": other_team.slug})

    assert response.status_code == 201, response.content
    assert response.json()["resubmitted_from"] is None
    assert api.get(f"{JOBS}{earlier.pk}/").json()["resubmissions"] == []


def test_a_job_lists_its_resubmissions_oldest_first(api, earlier):
    first = resubmit(api, earlier, {"memory_mb": 128}).json()["id"]
    second = resubmit(api, earlier, {"memory_mb": 256}).json()["id"]

    assert api.get(f"{JOBS}{earlier.pk}/").json()["resubmissions"] == [first, second]
    listed = {j["id"]: j for j in api.get(JOBS).json()["results"]}
    assert listed[str(earlier.pk)]["resubmissions"] == [first, second]
    assert listed[str(earlier.pk)]["resubmitted_from"] is None and listed[first]["resubmitted_from"] == str(earlier.pk)


def test_the_list_reads_resubmissions_in_one_query_however_many(api, earlier, django_assert_max_num_queries):
    for memory in (128, 256, 512):
        resubmit(api, earlier, {"memory_mb": memory})

    # The token, the count, the page, its holds, data files, dependencies, inputs, resubmissions, the rate card.
    with django_assert_max_num_queries(9):
        assert api.get(JOBS).json()["count"] == 4


@pytest.mark.parametrize(
    "body, field",
    [({"memory_mb": 1}, "memory_mb"), ({"cpus": "many"}, "cpus"), ({"time_limit_s": 0}, "time_limit_s"),
     ({"reuse": ["other.csv"]}, "reuse")],
)  # fmt: skip
def test_resubmit_with_a_bad_field_is_400_naming_it_and_makes_nothing(api, earlier, body, field):
    response = resubmit(api, earlier, body)

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert Job.objects.count() == 1


def test_resubmit_with_a_command_replaces_the_earlier_script(api, member, team, image, small_node):
    scripted = submit_job(member, team, image=image, command=["sh", "-c", "echo one\necho two"])

    response = resubmit(api, scripted, {"command": "echo three"})

    assert response.status_code == 201
    assert response.json()["command"] == ["echo", "three"]


def test_an_outsider_gets_404_on_resubmit_and_nothing_is_made(outsider_api, earlier):
    assert resubmit(outsider_api, earlier, {"memory_mb": 512}).status_code == 404
    assert Job.objects.count() == 1


def test_resubmit_of_no_such_job_is_404(api, earlier):
    assert api.post(f"{JOBS}00000000-0000-0000-0000-000000000000/resubmit/", {}, format="json").status_code == 404


def test_resubmit_takes_only_post(api, earlier):
    assert api.get(f"{JOBS}{earlier.pk}/resubmit/").status_code == 405


def test_resubmit_sent_again_with_its_key_answers_the_first_job(api, earlier):
    key = {"HTTP_IDEMPOTENCY_KEY": "again-1"}
    first = resubmit(api, earlier, {"memory_mb": 512}, **key)
    again = resubmit(api, earlier, {"memory_mb": 512}, **key)
    other = resubmit(api, earlier, {"memory_mb": 1024}, **key)

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 422)
    assert again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 2


# --- the browser's resubmit and the job pages ---------------------------------------------------------------


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def test_the_browser_resubmit_links_the_new_job_to_the_earlier(me, earlier):
    sent = {**declared_fields(earlier), "reuse": ["train.csv"], "submission": "a" * 32}

    response = me.post(f"/jobs/{earlier.pk}/resubmit/", sent)

    again = Job.objects.get(resubmitted_from=earlier)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{again.pk}/"


def test_the_job_pages_name_the_resubmit_and_what_it_resubmits(me, api, earlier):
    first = resubmit(api, earlier, {"name": "nightly bigger", "memory_mb": 512}).json()["id"]
    second = resubmit(api, earlier, {"name": "nightly biggest", "memory_mb": 1024}).json()["id"]

    page = me.get(f"/jobs/{earlier.pk}/").content.decode()
    said = text_of(page)
    assert re.search(r"Resubmitted as nightly bigger on [\d-]+ \d\d:\d\d and nightly biggest on ", said)
    assert f'<a href="/jobs/{first}/">nightly bigger</a>' in page
    assert f'<a href="/jobs/{second}/">nightly biggest</a>' in page
    assert "Resubmit of" not in said

    again = me.get(f"/jobs/{first}/").content.decode()
    assert "Resubmit of nightly" in text_of(again)
    assert f'<a href="/jobs/{earlier.pk}/">nightly</a>' in again
    assert "Resubmitted as" not in text_of(again)
    # Each names the other, never by its raw id.
    assert str(earlier.pk) not in text_of(again) and first not in text_of(page) and second not in text_of(page)


def test_a_job_never_resubmitted_says_neither(me, earlier):
    said = text_of(me.get(f"/jobs/{earlier.pk}/").content.decode())

    assert "Resubmit of" not in said and "Resubmitted as" not in said


# --- the memory proposed after running out of it -----------------------------------------------------------


def out_of_memory(member, team, image, *, memory_mb: int) -> Job:
    return ended_job(member, team, image=image, outcome=Outcome.OUT_OF_MEMORY, at=T0, memory_mb=memory_mb)


def test_a_job_that_ran_out_of_memory_is_proposed_twice_its_memory(member, team, image, small_node):
    proposal = memory_proposal(out_of_memory(member, team, image, memory_mb=64))

    assert proposal is not None and proposal.proposed_mb == 128
    assert proposal.words == "It ran out of memory at 64 MB; 128 MB proposed."


def test_the_proposal_is_capped_at_the_largest_nodes_memory(member, team, image, small_node):
    proposal = memory_proposal(out_of_memory(member, team, image, memory_mb=3000))

    assert proposal is not None and proposal.proposed_mb == 4096
    assert proposal.words == "It ran out of memory at 3000 MB; 4096 MB proposed (the largest node's memory)."


def test_no_proposal_when_no_node_has_more_or_the_job_did_not_run_out(member, team, image, small_node):
    assert memory_proposal(out_of_memory(member, team, image, memory_mb=4096)) is None
    failed = ended_job(member, team, image=image, outcome=Outcome.FAILED, at=T0, exit_code=1, memory_mb=64)
    assert memory_proposal(failed) is None


def test_the_resubmit_form_of_a_job_out_of_memory_holds_the_proposal_and_says_why(me, member, team, image, small_node):
    job = out_of_memory(member, team, image, memory_mb=64)

    page = me.get(f"/jobs/{job.pk}/resubmit/").content.decode()

    assert re.search(r'name="memory_mb" value="128"', page)
    assert "It ran out of memory at 64 MB; 128 MB proposed." in text_of(page)


def test_the_resubmit_form_of_a_job_that_failed_otherwise_keeps_its_memory(me, member, team, image, small_node):
    job = ended_job(member, team, image=image, outcome=Outcome.FAILED, at=T0, exit_code=1, memory_mb=64)

    page = me.get(f"/jobs/{job.pk}/resubmit/").content.decode()

    assert re.search(r'name="memory_mb" value="64"', page)
    assert "proposed" not in text_of(page)

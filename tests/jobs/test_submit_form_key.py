"""The submit form's submission key: a form sent twice rents compute once."""

import re

import pytest

from jobs.models import Job


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def declared(submission: str, **changes) -> dict:
    form = {"name": "nightly retrain", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64",
            "time_limit_s": "60", "submission": submission}  # fmt: skip
    return {**form, **changes}


def key_of(response) -> str:
    return re.search(rb'name="submission" value="([0-9a-f]{32})"', response.content).group(1).decode()


def test_each_form_carries_its_own_submission_key(me, image):
    assert key_of(me.get("/jobs/new/")) != key_of(me.get("/jobs/new/"))


def test_a_form_sent_twice_submits_one_job_and_says_so(me, image):
    key = key_of(me.get("/jobs/new/"))

    first = me.post("/jobs/new/", declared(key))
    second = me.post("/jobs/new/", declared(key), follow=True)

    job = Job.objects.get()
    assert first["Location"] == f"/jobs/{job.pk}/"
    assert second.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert b"This form was sent before" in second.content


def test_a_form_sent_again_with_other_values_submits_another_job(me, image):
    key = key_of(me.get("/jobs/new/"))

    first = me.post("/jobs/new/", declared(key))
    edited = me.post("/jobs/new/", declared(key, name="nightly retrain, fixed"))  # back, edit, submit

    assert first.status_code == edited.status_code == 302 and first["Location"] != edited["Location"]
    assert sorted(Job.objects.values_list("name", flat=True)) == ["nightly retrain", "nightly retrain, fixed"]


def test_a_form_shown_again_with_errors_keeps_its_key(me, image):
    key = key_of(me.get("/jobs/new/"))

    response = me.post("/jobs/new/", declared(key, cpus="0"))

    assert response.status_code == 400 and key_of(response) == key
    assert me.post("/jobs/new/", declared(key)).status_code == 302
    assert Job.objects.count() == 1


@pytest.mark.parametrize("key", ["", "not-a-key", "A" * 32])
def test_a_missing_or_odd_key_still_submits(me, image, key):
    assert me.post("/jobs/new/", declared(key)).status_code == 302
    assert me.post("/jobs/new/", declared(key)).status_code == 302
    assert Job.objects.count() == 2  # no usable key: nothing to recognise the second by

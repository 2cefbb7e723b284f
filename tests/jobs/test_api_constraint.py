"""A job's `constraint` at submit (POST /api/v1/jobs/): judged against the registered nodes' features, a
constraint no node has is refused naming the feature, a malformed one saying what is not a feature."""

from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job
from pool.nodes import set_features

JOBS = "/api/v1/jobs/"


def submission(**changes) -> dict:
    return {"name": "wants a big node", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64,
            "time_limit_s": 60, **changes}  # fmt: skip


def test_a_constraint_no_node_has_is_refused_naming_the_feature(api, image, local_node):
    set_features(local_node, ["bigmem"])

    response = api.post(JOBS, submission(constraint="gpu-h100"), format="json")

    assert response.status_code == 400
    [said] = response.json()["constraint"]
    assert "no node of the pool has the feature gpu-h100" in said.lower()
    assert not Job.objects.exists()


def test_a_malformed_constraint_is_refused_saying_what_is_not_a_feature(api, image, local_node):
    response = api.post(JOBS, submission(constraint="bigmem&"), format="json")

    assert response.status_code == 400
    assert "'(nothing)' is not a feature" in response.json()["constraint"][0]


def test_a_constraint_a_node_meets_is_kept_and_the_job_is_held_there(api, image, local_node):
    set_features(local_node, ["bigmem", "nvme"])

    response = api.post(JOBS, submission(constraint="bigmem&nvme"), format="json")

    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.constraint == "bigmem&nvme"
    [held] = schedule_pass(now=timezone.now())
    assert (held.job_id, held.node) == (job.pk, local_node)

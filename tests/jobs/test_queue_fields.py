"""A job's queue, constraint and preemptable, as the API, the form, arrays and templates take and show them;
each refusal a 400 naming the field."""

import pytest
from django.utils import timezone

from jobs.models import Job, JobArray
from jobtemplates.models import JobTemplate
from pool.models import Queue, TeamQueue
from pool.nodes import Capacity, register
from schedules.submitting import problems
from tests.factories import RuntimeImageFactory, member_of, pool_default_queue, submit_job

JOBS = "/api/v1/jobs/"


def declared(**changes) -> dict:
    body = {"name": "hotfix", "image": "busybox", "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 60}
    return {k: v for k, v in (body | changes).items() if v is not None}


@pytest.fixture
def queues(db, image, team):
    urgent = Queue.objects.create(name="urgent", priority=100, preempts_lower=True, opt_out_allowed=True)
    urgent.teams.add(team)  # a preempting queue names its teams
    scavenger = Queue.objects.create(name="scavenger", priority=0, max_running_cores_per_team=2)
    return {"urgent": urgent, "batch": pool_default_queue(), "scavenger": scavenger}


@pytest.fixture
def image(db):
    return RuntimeImageFactory(name="busybox")


@pytest.fixture
def featured_node(db):
    node = register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=timezone.now())
    node.features = ["bigmem", "nvme"]
    node.save(update_fields=["features"])
    return node


def test_a_job_names_its_queue_constraint_and_opt_out_and_the_answer_shows_them(api, queues, featured_node):
    response = api.post(JOBS, declared(queue="urgent", constraint="nvme & bigmem", preemptable=False), format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["queue"], body["constraint"], body["preemptable"]) == ("urgent", "bigmem&nvme", False)
    job = Job.objects.get(pk=body["id"])
    assert (job.queue, job.constraint, job.preemptable) == (queues["urgent"], "bigmem&nvme", False)
    assert api.get(f"{JOBS}{job.pk}/").json()["queue"] == "urgent"


def test_a_job_naming_no_queue_waits_in_its_teams_default_else_the_pools(api, team, queues):
    assert api.post(JOBS, declared(), format="json").json()["queue"] == "batch"

    TeamQueue.objects.create(team=team, queue=queues["scavenger"])

    body = api.post(JOBS, declared(), format="json").json()
    assert (body["queue"], body["constraint"], body["preemptable"]) == ("scavenger", "", True)


def test_a_form_body_says_preemptable_as_text(api, queues):
    response = api.post(JOBS, declared(queue="urgent", preemptable="false"), format="multipart")

    assert response.status_code == 201, response.content
    assert response.json()["preemptable"] is False


@pytest.mark.parametrize(
    ("changes", "field", "said"),
    [
        ({"queue": "express"}, "queue", "There is no queue express: the queues are urgent, batch, scavenger."),
        ({"queue": "batch", "preemptable": False}, "preemptable", "The queue batch does not let a job opt out"),
        ({"queue": "scavenger", "cpus": 3}, "cpus", "The queue scavenger lets a team hold at most 2 cores at once"),
        ({"preemptable": "perhaps"}, "preemptable", "Must be true or false."),
        ({"constraint": "big mem"}, "constraint", "'big mem' is not a feature"),
        ({"constraint": "bigmem&gpu-h100"}, "constraint", "No node of the pool has the feature gpu-h100."),
    ],
)
def test_a_submission_the_queue_or_the_nodes_refuse_is_a_400_naming_the_field(
    api, queues, featured_node, changes, field, said
):
    response = api.post(JOBS, declared(**changes), format="json")

    assert response.status_code == 400
    assert said in response.json()[field][0]
    assert not Job.objects.exists()


def test_a_team_may_not_use_a_queue_for_other_teams(api, other_team, queues):
    queues["urgent"].teams.set([other_team])

    response = api.post(JOBS, declared(queue="urgent"), format="json")

    assert response.status_code == 400
    assert response.json()["queue"] == ["The team red may not use the queue urgent."]


def test_a_queue_for_some_teams_takes_their_jobs(other_team, queues, outsider_api):
    queues["urgent"].teams.add(other_team)

    response = outsider_api.post(JOBS, declared(queue="urgent"), format="json")

    assert response.status_code == 201 and response.json()["queue"] == "urgent"
    assert Job.objects.get(team=other_team).queue == queues["urgent"]


def test_the_submission_document_has_the_three_fields(api):
    properties = api.get("/api/schema/?format=json").json()["components"]["schemas"]["JobSubmission"]["properties"]

    assert properties["preemptable"] == {"type": "boolean", "default": True, "description": properties[
        "preemptable"]["description"]}  # fmt: skip
    assert properties["queue"]["type"] == properties["constraint"]["type"] == "string"


def test_every_task_of_an_array_waits_in_its_queue(api, queues):
    response = api.post("/api/v1/arrays/", declared(queue="urgent", indices="0-2"), format="json")

    assert response.status_code == 201, response.content
    tasks = Job.objects.filter(array=JobArray.objects.get())
    assert {t.queue.name for t in tasks} == {"urgent"} and tasks.count() == 3


def test_the_form_offers_the_queues_the_team_may_use_and_submits_to_one(client, member, other_team, queues):
    queues["scavenger"].teams.add(other_team)
    client.force_login(member)

    page = client.get("/jobs/new/").content.decode()
    response = client.post("/jobs/new/", declared(queue="urgent", command="echo hi"))

    assert '<option value="urgent">urgent (priority 100, preempts lower queues)</option>' in page
    assert 'value="scavenger"' not in page
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert Job.objects.get().queue == queues["urgent"]


def test_the_form_says_an_unknown_queue_on_its_field(client, member, queues):
    client.force_login(member)

    response = client.post("/jobs/new/", declared(queue="express"))

    assert response.status_code == 400
    assert "There is no queue express" in response.content.decode()


def test_the_job_page_shows_its_queue_constraint_and_opt_out(client, member, team, queues, image):
    job = submit_job(member, team, image=image, queue=queues["urgent"], constraint="bigmem", preemptable=False)
    client.force_login(member)

    content = client.get(f"/jobs/{job.pk}/").content.decode()

    assert '<dd id="queue"><code>urgent</code> (priority 100)</dd>' in content
    assert '<dd id="constraint"><code>bigmem</code></dd>' in content
    assert '<dd id="preemptable">no: it asked not to be (preemptable=false)</dd>' in content


def test_a_template_run_names_its_queue(client, member, team, queues, image):
    template = JobTemplate.objects.create(team=team, name="nightly", image=image, command="true")
    client.force_login(member)

    response = client.post(f"/templates/{template.pk}/", {"name": "nightly", "queue": "urgent", "cpus": 1,
        "memory_mb": 64, "gpus": 0, "time_limit_s": 60})  # fmt: skip

    assert response.status_code == 302, response.content.decode()[-3000:]
    assert Job.objects.get().queue == queues["urgent"]


def test_resubmitting_a_job_keeps_its_queue(client, member, team, queues, image):
    job = submit_job(member, team, image=image, queue=queues["urgent"], preemptable=False)
    client.force_login(member)

    content = client.get(f"/jobs/{job.pk}/resubmit/").content.decode()

    assert '<option value="urgent" selected>' in content
    assert '<option value="false" selected>no</option>' in content


def test_a_teammates_default_queue_is_not_anothers(team, other_team, queues):
    TeamQueue.objects.create(team=team, queue=queues["urgent"])
    bea = member_of(other_team, "bea")

    assert submit_job(bea, other_team).queue == queues["batch"]


def test_a_schedules_job_is_checked_for_its_queue_as_a_submission(member, team, queues):
    job = declared(queue="express")

    errors = problems(team=team, user=member, template=None, job=job)

    assert errors == {"job.queue": ["There is no queue express: the queues are urgent, batch, scavenger."]}
    assert problems(team=team, user=member, template=None, job=declared(queue="urgent")) == {}

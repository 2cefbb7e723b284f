"""A hostile team against the pool policy: a queue closed to it stays closed by every path (names spelt
otherwise, an array's resubmit after the queue was closed), a job's queue cannot be changed after submit,
bad constraints are 400s, and a member does not reach the operator's pages."""

import pytest
from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, JobArray, Outcome
from pool.models import Queue, TeamQueue
from pool.nodes import Capacity, register
from tests.factories import RuntimeImageFactory, pool_default_queue, run_to_release, submit_array_of, submit_job
from tests.jobs.conftest import T0

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/arrays/"


def declared(**changes) -> dict:
    body = {"name": "grab", "image": "busybox", "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 60}
    return body | changes


@pytest.fixture
def image(db):
    return RuntimeImageFactory(name="busybox")


@pytest.fixture
def urgent(db, other_team, image):
    """A preempting queue for the blue team only; the red team (api's) may not use it."""
    queue = Queue.objects.create(name="urgent", priority=100, preempts_lower=True, opt_out_allowed=True)
    queue.teams.add(other_team)
    pool_default_queue()
    return queue


@pytest.fixture
def node(db):
    found = register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=timezone.now())
    found.features = ["bigmem"]
    found.save(update_fields=["features"])
    return found


@pytest.mark.parametrize("spelt", ["URGENT", "Urgent", " urgent ", "urgent\n", "urgent\u200b", "{pk}"])
def test_a_queue_closed_to_the_team_stays_closed_however_it_is_spelt(api, urgent, spelt):
    response = api.post(JOBS, declared(queue=spelt.format(pk=urgent.pk)), format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["queue"]
    assert not Job.objects.exists()


def test_an_array_into_a_closed_queue_is_refused_before_any_task_is_made(api, urgent):
    response = api.post(ARRAYS, declared(queue="urgent", indices="0-999"), format="json")

    assert response.status_code == 400
    assert response.json()["queue"] == ["The team red may not use the queue urgent."]
    assert not Job.objects.exists() and not JobArray.objects.exists()


def test_resubmitting_an_array_after_its_queue_was_closed_to_the_team_is_refused(api, member, team, urgent, image):
    urgent.teams.add(team)
    array = submit_array_of(member, team, range(2), image=image, queue=urgent)
    urgent.teams.remove(team)

    response = api.post(f"{ARRAYS}{array.pk}/resubmit/")

    assert response.status_code == 400, response.content
    assert "may not use the queue urgent" in str(response.json())
    assert JobArray.objects.count() == 1


def test_a_jobs_queue_and_opt_out_cannot_be_changed_after_submit(api, member, team, urgent, image):
    job = submit_job(member, team, image=image)

    for answer in (
        api.patch(f"{JOBS}{job.pk}/", {"queue": "urgent", "preemptable": False}, format="json"),
        api.put(f"{JOBS}{job.pk}/", declared(queue="urgent", preemptable=False), format="json"),
    ):
        assert answer.status_code == 405
    job.refresh_from_db()
    assert (job.queue.name, job.preemptable) == ("batch", True)


@pytest.mark.parametrize(
    "constraint",
    ["bigmem||nvme", "&bigmem", "bigmem&", "|", "bigmem&&nvme", "b" * 100_000, "bigmem'; DROP TABLE jobs_job;--",
     "bïgmem", "bigmem\x00", "(bigmem)", "!bigmem"],
)  # fmt: skip
def test_a_malformed_constraint_is_a_400_on_its_field(api, urgent, node, constraint):
    response = api.post(JOBS, declared(constraint=constraint), format="json")

    assert response.status_code == 400, response.content[:300]
    assert list(response.json()) == ["constraint"]
    assert not Job.objects.exists()


def test_a_member_does_not_reach_the_operator_panel_nor_the_queue_admin(client, member, urgent, node):
    client.force_login(member)

    assert client.get("/operator/").status_code in (403, 404)
    assert client.get("/operator/nodes/n1/").status_code in (403, 404)
    assert client.post("/operator/nodes/n1/drain/").status_code in (403, 404)
    assert client.get("/admin/pool/queue/").status_code == 302  # to the admin's login: not staff
    assert client.post(f"/admin/pool/queue/{urgent.pk}/change/", {"name": "urgent"}).status_code == 302
    assert list(urgent.teams.values_list("slug", flat=True)) == ["blue"]


def test_a_member_may_not_drain_a_node_nor_relabel_its_features_through_the_api(api, node):
    assert api.post("/api/v1/pool/nodes/n1/drain/").status_code == 403
    assert api.patch("/api/v1/pool/nodes/n1/", {"features": ["secret"]}, format="json").status_code == 405
    node.refresh_from_db()
    assert (node.state, node.features) == ("active", ["bigmem"])


def test_the_job_that_preempted_ours_is_an_id_only_its_team_may_open(
    api, client, member, team, outsider, other_team, image
):
    ours = submit_job(member, team, image=image)
    theirs = submit_job(outsider, other_team, image=image, name="secret-sweep")
    Job.objects.filter(pk=ours.pk).update(preempted_by=theirs)
    client.force_login(member)

    assert api.get(f"{JOBS}{ours.pk}/").json()["preempted_by"] == str(theirs.pk)
    assert api.get(f"{JOBS}{theirs.pk}/").status_code == 404
    assert api.get(f"{JOBS}{theirs.pk}/events/").status_code == 404
    assert client.get(f"/jobs/{theirs.pk}/").status_code == 404
    assert "secret-sweep" not in client.get(f"/jobs/{ours.pk}/").content.decode()


def test_a_member_reads_the_windows_ahead_but_cannot_make_one(api):
    assert api.get("/api/v1/pool/windows/").status_code == 200
    assert api.post("/api/v1/pool/windows/", {"reason": "mine", "starts_at": "2030-01-01T00:00:00Z",
        "ends_at": "2030-01-02T00:00:00Z"}, format="json").status_code == 405  # fmt: skip


def test_a_refused_queue_name_does_not_tell_the_queues_of_other_teams(api, urgent):
    response = api.post(JOBS, declared(queue="express"), format="json")

    assert response.status_code == 400
    assert response.json() == {"queue": ["There is no queue express: the queues are batch."]}


def test_the_array_page_refuses_to_resubmit_failed_tasks_into_a_closed_queue(client, member, team, urgent, local_node):
    urgent.teams.add(team)
    array = submit_array_of(member, team, range(1), queue=urgent)
    schedule_pass(now=T0)
    run_to_release(Job.objects.get(array=array), now=T0, outcome=Outcome.FAILED, exit_code=1)
    urgent.teams.remove(team)
    client.force_login(member)

    response = client.post(f"/arrays/{array.pk}/resubmit/", follow=True)

    assert "The team red may not use the queue urgent." in response.content.decode()
    assert JobArray.objects.count() == 1


def test_a_teams_own_default_queue_since_closed_to_it_gives_way_to_the_pools(api, team, urgent):
    TeamQueue.objects.create(team=team, queue=urgent)  # then the operator kept urgent for the blue team

    response = api.post(JOBS, declared(), format="json")

    assert response.status_code == 201, response.content
    assert response.json()["queue"] == "batch"


def test_a_team_the_pools_default_queue_is_closed_to_must_name_a_queue(api, other_team, urgent):
    Queue.objects.get(is_default=True).teams.add(other_team)

    response = api.post(JOBS, declared(), format="json")

    assert response.status_code == 400, response.content
    assert response.json() == {"queue": ["The team red may use no default queue: name one it may use."]}
    assert not Job.objects.exists()

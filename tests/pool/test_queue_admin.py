"""Queues in the admin: an operator sets their policy; every change says who made it, on the queue
(changed_by, changed_at) and in its history (Django's admin log)."""

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry

from pool.models import Queue, TeamQueue
from tests.factories import submit_job


def queue_form(**changes) -> dict:
    form = {
        "name": "urgent", "description": "", "priority": "100", "max_running_cores_per_team": "",
        "max_running_jobs_per_team": "", "preempts_lower": "on", "preemptable": "on",
        "default_for-TOTAL_FORMS": "0", "default_for-INITIAL_FORMS": "0",
        "default_for-MIN_NUM_FORMS": "0", "default_for-MAX_NUM_FORMS": "1000",
    }  # fmt: skip
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


def test_an_operator_makes_a_queue_and_it_records_who(client, operator, team):
    client.force_login(operator)

    response = client.post("/admin/pool/queue/add/", queue_form(teams=[team.pk]))

    assert response.status_code == 302, response.content.decode()[-2000:]
    queue = Queue.objects.get(name="urgent")
    assert (queue.priority, queue.preempts_lower, queue.changed_by) == (100, True, operator)
    assert queue.preempts
    assert LogEntry.objects.get(object_id=str(queue.pk), content_type__model="queue").action_flag == ADDITION


def test_each_policy_change_is_in_the_queues_history_with_who_made_it(client, operator, team):
    queue = Queue.objects.create(name="urgent", priority=100)
    client.force_login(operator)

    policy = queue_form(priority="90", max_running_cores_per_team="8", preempts_lower=None)
    client.post(f"/admin/pool/queue/{queue.pk}/change/", policy)
    client.post(f"/admin/pool/queue/{queue.pk}/change/", {**policy, "teams": [team.pk]})

    queue.refresh_from_db()
    assert (queue.priority, queue.max_running_cores_per_team, queue.changed_by) == (90, 8, operator)
    assert list(queue.teams.all()) == [team]
    entries = LogEntry.objects.filter(object_id=str(queue.pk), content_type__model="queue").order_by("id")
    assert [(e.user, e.action_flag) for e in entries] == [(operator, CHANGE), (operator, CHANGE)]
    history = client.get(f"/admin/pool/queue/{queue.pk}/history/").content.decode()
    assert history.count("olga") >= 2
    assert "Changed Priority and Max running cores per team." in history
    assert "Changed Teams." in history


def test_a_teams_default_queue_set_on_the_queue_records_who(client, operator, team):
    queue = Queue.objects.create(name="urgent", priority=100)
    client.force_login(operator)

    response = client.post(
        f"/admin/pool/queue/{queue.pk}/change/",
        queue_form(teams=[team.pk], **{"default_for-TOTAL_FORMS": "1", "default_for-0-team": str(team.pk)}),
    )

    assert response.status_code == 302, response.content.decode()[-2000:]
    assert TeamQueue.objects.get(team=team).queue == queue
    queue.refresh_from_db()
    assert queue.changed_by == operator
    entry = LogEntry.objects.filter(object_id=str(queue.pk)).latest("id")
    assert entry.user == operator and "Added team queue" in entry.get_change_message()


def test_the_queue_list_shows_its_policy_and_who_changed_it(client, operator, team):
    queue = Queue.objects.create(name="urgent", priority=100, max_running_cores_per_team=8, changed_by=operator)
    queue.teams.add(team)
    client.force_login(operator)

    content = client.get("/admin/pool/queue/").content.decode()

    assert "urgent" in content and ">red<" in content and ">every team<" in content and "olga" in content


def test_a_queue_jobs_wait_in_cannot_be_deleted(client, operator, member, team):
    queue = Queue.objects.create(name="urgent", priority=100)
    submit_job(member, team, queue=queue)
    client.force_login(operator)

    assert client.get(f"/admin/pool/queue/{queue.pk}/delete/").status_code == 403


def test_a_preempting_queue_naming_no_teams_is_refused_saying_why(client, operator):
    client.force_login(operator)

    response = client.post("/admin/pool/queue/add/", queue_form())

    assert response.status_code == 200
    assert not Queue.objects.filter(name="urgent").exists()
    text = response.content.decode()
    assert "A queue that preempts lower queues names the teams that may use it: choose at least one" in text
    assert "or untick &quot;Preempts lower&quot;." in text


def test_a_queue_that_does_not_preempt_may_name_no_teams(client, operator):
    client.force_login(operator)

    response = client.post("/admin/pool/queue/add/", queue_form(preempts_lower=None))

    assert response.status_code == 302, response.content.decode()[-2000:]
    assert not Queue.objects.get(name="urgent").teams.exists()  # every team may use it


def test_a_preempting_queue_left_with_no_teams_says_it_does_not_preempt_now(client, operator, team):
    stopped = Queue.objects.create(name="urgent", priority=100, preempts_lower=True)
    named = Queue.objects.create(name="express", priority=90, preempts_lower=True)
    named.teams.add(team)
    client.force_login(operator)

    listed = client.get("/admin/pool/queue/").content.decode()
    page = client.get(f"/admin/pool/queue/{stopped.pk}/change/").content.decode()
    other = client.get(f"/admin/pool/queue/{named.pk}/change/").content.decode()

    assert '<td class="field-preempting">not now: it names no teams</td>' in listed
    assert '<td class="field-preempting">yes</td>' in listed
    said = (
        "does not preempt now: a preempting queue must name the teams that may use it, and this one names none; "
        "its jobs are served by its priority but take no one&#x27;s cores until an operator chooses its teams"
    )
    assert f"The queue urgent {said}." in page  # the warning at the top
    assert f'<div class="readonly">{said}</div>' in page
    assert "preempts lower queues&#x27; jobs; only the team red may use it" in other
    assert "does not preempt now" not in other

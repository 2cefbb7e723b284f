"""Preemption in the pass and at the release: an urgent job that cannot be held marks the lower jobs it
needs stopped, with events on both; the node releases them `preempted` with their own record, and they go
back to the queue in their place, keeping their outputs, not counting against max_retries."""

from datetime import UTC, date, datetime, timedelta

import pytest

from accounting.fairshare import usage_now
from accounting.models import Record
from accounting.statements import statement
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.lifecycle.history import REAPER, events_of
from jobs.lifecycle.inputs import kept_outputs
from jobs.lifecycle.retries import attempts_of
from jobs.models import Job, Outcome, OutputFile, Stage
from jobs.scheduling.queue import waiting
from pool.models import Node, Queue
from pool.nodes import Capacity, register
from tests.conftest import api_client_for
from tests.factories import TeamFactory, member_of, store_output, submit_job

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def n1(db) -> Node:
    return register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=T0)


@pytest.fixture
def urgent(db, team) -> Queue:
    """A preempting queue, which names the teams that may use it (the red team)."""
    queue = Queue.objects.create(name="urgent", priority=10, preempts_lower=True)
    queue.teams.add(team)
    return queue


@pytest.fixture
def scavenger(db) -> Queue:
    return Queue.objects.create(name="scavenger", priority=-10, opt_out_allowed=True)


def in_queue(job: Job, queue: Queue, **fields) -> Job:
    Job.objects.filter(pk=job.pk).update(queue=queue, **fields)
    job.refresh_from_db()
    return job


def running(user, team, queue: Queue, *, at_: datetime, cpus: int = 1, **fields) -> Job:
    job = in_queue(submit_job(user, team, cpus=cpus, time_limit_s=3600), queue, **fields)
    assert job.pk in {h.job_id for h in schedule_pass(now=at_)}
    job.refresh_from_db()
    assert actions.start_run(job, now=at_)
    return job


def preempted_by_its_node(job: Job, *, now: datetime) -> Job:
    """What the node does once it sees preempted_by: the container gone, outputs collected, the release."""
    job.refresh_from_db()
    reason = f"preempted by job {job.preempted_by_id}"
    actions.finish_run(job, outcome=Outcome.PREEMPTED, exit_code=0, reason=reason, now=now)
    return actions.release(job, outcome=Outcome.PREEMPTED, reason=reason, exit_code=0, now=now, attempt=job.attempt)


def test_an_urgent_job_that_cannot_be_held_marks_the_lower_job_stopped(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)

    assert schedule_pass(now=at(60)) == []

    low.refresh_from_db()
    first.refresh_from_db()
    assert low.preempted_by_id == first.pk
    assert low.stage == Stage.RUN  # its node stops it
    assert first.wait_reason.startswith("waits for the job it preempted to stop")
    assert str(low.pk) in first.wait_reason
    [on_low] = [e for e in events_of(low) if e.event == "preempt"]
    assert on_low.reason == f"preempted by job {first.pk} (queue urgent, team red) on node n1"
    [on_first] = [e for e in events_of(first) if e.event == "preempt"]
    assert on_first.reason == f"preempting job {low.pk} (queue scavenger, team red) on node n1"


def test_a_second_pass_during_the_grace_time_preempts_nothing_more(member, team, n1, urgent, scavenger):
    one = running(member, team, scavenger, at_=T0)
    two = running(member, team, scavenger, at_=T0)
    first = in_queue(submit_job(member, team, cpus=1, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    schedule_pass(now=at(61))
    marked = Job.objects.filter(pk__in=[one.pk, two.pk], preempted_by=first)
    assert marked.count() == 1


def test_a_job_that_opted_out_is_not_preempted(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2, preemptable=False)
    in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    low.refresh_from_db()
    assert low.preempted_by_id is None


def test_a_preempted_job_is_requeued_in_its_place_with_a_preempted_record(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    submitted_at = low.submitted_at

    low = preempted_by_its_node(low, now=at(90))

    assert (low.stage, low.attempt, low.preemptions, low.preempted_by_id) == (Stage.SUBMIT, 2, 1, None)
    assert low.submitted_at == submitted_at  # its place in the queue
    [record] = Record.objects.filter(job_id=low.pk)
    assert (record.outcome, record.attempt) == (Outcome.PREEMPTED, 1)
    assert record.released_at == at(90)  # what it held until its node stopped it
    assert attempts_of(low)[0]["outcome"] == Outcome.PREEMPTED
    [hold] = schedule_pass(now=at(91))
    assert hold.job_id == first.pk  # the freed cores go to the job that preempted


def test_a_preempted_attempt_does_not_count_against_max_retries(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2, max_retries=0)
    in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    low = preempted_by_its_node(low, now=at(90))
    assert low.stage == Stage.SUBMIT  # requeued with no retries at all


def test_a_preempted_attempt_keeps_its_outputs_for_the_next(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    low.refresh_from_db()
    actions.finish_run(low, outcome=Outcome.PREEMPTED, exit_code=0, reason="preempted", now=at(90))
    store_output(low, "checkpoint.txt", b"step 41")
    low = actions.release(low, outcome=Outcome.PREEMPTED, reason="preempted", now=at(90), attempt=1)

    assert list(OutputFile.objects.filter(job=low).values_list("path", flat=True)) == ["checkpoint.txt"]
    [kept] = kept_outputs(low)
    assert (kept.name, kept.size) == ("checkpoint.txt", 7)


def test_a_job_whose_node_is_lost_while_being_preempted_is_requeued_all_the_same(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2, max_retries=0)
    in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))

    low = actions.release_lost(low, node_name="n1", last_heartbeat=at(65), now=at(120), actor=REAPER)

    assert (low.stage, low.attempt, low.preemptions) == (Stage.SUBMIT, 2, 1)  # its retries untouched


def test_a_job_cancelled_while_being_preempted_ends_cancelled_and_pays_nothing_for_the_attempt(
    member, team, n1, urgent, scavenger
):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    actions.cancel(low, now=at(70))

    low = preempted_by_its_node(low, now=at(90))

    [record] = Record.objects.filter(job_id=low.pk)
    assert (record.outcome, record.attempt, record.cost, record.held_seconds) == (Outcome.PREEMPTED, 1, 0, 90)
    assert (low.stage, low.outcome, low.attempt) == (Stage.RELEASE, Outcome.CANCELLED, 1)  # not requeued
    assert low.preempted_by_id is None  # no job stops it any more: the API and page do not say one does
    assert low.reason == (
        f"cancelled while being preempted (preempted by job {first.pk}); the preempted attempt is not charged"
    )
    history = [(e.event, e.outcome) for e in events_of(low) if at(60) <= e.at <= at(90)]
    assert history == [
        ("preempt", ""), ("cancel", ""), ("finish", Outcome.PREEMPTED), ("collect", Outcome.CANCELLED)]  # fmt: skip
    month = statement(team, date(2026, 3, 1))
    lines = [(line["outcome"], line["charged"], line["cost"]) for line in month.lines]
    assert lines == [(Outcome.PREEMPTED, False, "0.000000")]
    assert (month.total, month.not_charged) == (0, 1)
    assert usage_now(now=at(90)) == {}  # nor is its team pushed back in the queue for it


def test_the_page_of_a_job_being_preempted_names_the_job_it_stops_for(client, member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    client.force_login(member)

    page = client.get(f"/jobs/{low.pk}/").content.decode()

    assert 'id="preempted-by"' in page and str(first.pk) in page
    named = f'job <a href="/jobs/{first.pk}/">{first.name}</a>'  # its history names the job, linked
    assert f"preempted by {named} (queue urgent, team red) on node n1" in page
    waiting = client.get(f"/jobs/{first.pk}/").content.decode()
    assert f'preempting job <a href="/jobs/{low.pk}/">{low.name}</a> (queue scavenger, team red) on node n1' in waiting


def test_the_api_shows_the_preemptions_and_the_preempted_attempt(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    assert api_client_for(member).get(f"/api/v1/jobs/{low.pk}/").json()["preempted_by"] == str(first.pk)

    preempted_by_its_node(low, now=at(90))

    body = api_client_for(member).get(f"/api/v1/jobs/{low.pk}/").json()
    assert (body["preemptions"], body["preempted_by"]) == (1, None)
    assert [(a["attempt"], a["outcome"]) for a in body["attempts"]] == [(1, Outcome.PREEMPTED), (2, "")]


def test_the_cores_a_first_victim_frees_wait_for_the_job_that_preempted(member, team, n1, urgent, scavenger):
    """A job waiting for two victims to stop is reserved on the cores the first one frees: a lower job
    (here the first victim itself, requeued) is not backfilled there, to be preempted again a moment later."""
    long = running(member, team, scavenger, at_=T0, time_limit_s=86400)
    short = running(member, team, scavenger, at_=at(10), time_limit_s=600)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    assert set(Job.objects.filter(preempted_by=first).values_list("pk", flat=True)) == {long.pk, short.pk}

    preempted_by_its_node(short, now=at(70))

    assert schedule_pass(now=at(71)) == []
    preempted_by_its_node(long, now=at(80))
    [hold] = schedule_pass(now=at(81))
    assert hold.job_id == first.pk


def test_across_teams_the_events_name_the_other_job_but_not_its_team(
    client, member, team, outsider, other_team, n1, urgent, scavenger
):
    low = running(outsider, other_team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))

    [on_low] = [e for e in events_of(low) if e.event == "preempt"]
    assert on_low.reason == f"preempted by job {first.pk} (queue urgent, another team) on node n1"
    [on_first] = [e for e in events_of(first) if e.event == "preempt"]
    assert on_first.reason == f"preempting job {low.pk} (queue scavenger, another team) on node n1"
    client.force_login(outsider)
    assert client.get(f"/jobs/{first.pk}/").status_code == 404
    assert api_client_for(outsider).get(f"/api/v1/jobs/{first.pk}/").status_code == 404


def test_a_preempting_queue_that_names_no_teams_preempts_nobody_until_it_names_them(
    member, team, n1, urgent, scavenger
):
    urgent.teams.clear()  # as a queue made before a preempting queue had to name its teams
    low = running(member, team, scavenger, at_=T0, cpus=2)
    first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)

    assert schedule_pass(now=at(60)) == []
    low.refresh_from_db()
    assert low.preempted_by_id is None  # its job waits, as a job of any high queue does
    first.refresh_from_db()
    assert first.queue_position == 1 and "waits for the job it preempted" not in first.wait_reason

    urgent.teams.add(team)
    schedule_pass(now=at(61))
    low.refresh_from_db()
    assert low.preempted_by_id == first.pk


def test_a_team_taken_out_of_a_preempting_queue_preempts_no_more_with_its_jobs_waiting_there(
    member, team, outsider, other_team, n1, urgent, scavenger
):
    urgent.teams.add(other_team)
    low = running(member, team, scavenger, at_=T0, cpus=2)
    theirs = in_queue(submit_job(outsider, other_team, cpus=2, time_limit_s=600), urgent)  # while blue may use it
    urgent.teams.remove(other_team)  # an operator takes blue out; urgent still names red

    assert schedule_pass(now=at(60)) == []
    low.refresh_from_db()
    assert low.preempted_by_id is None
    theirs.refresh_from_db()
    assert (theirs.stage, theirs.queue_position) == (Stage.SUBMIT, 1)  # still served first, by urgent's priority
    assert "waits for the job it preempted" not in theirs.wait_reason

    ours = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(61))
    low.refresh_from_db()
    assert low.preempted_by_id == ours.pk  # the queue preempts still, for the team it names


def test_whether_each_waiting_job_preempts_is_read_in_two_queries_whatever_its_team(
    member, team, n1, urgent, scavenger, django_assert_num_queries
):
    named, left_out = [TeamFactory(slug=f"named{i}") for i in range(3)], [TeamFactory(slug=f"out{i}") for i in range(3)]
    urgent.teams.add(*named)
    for other in [*named, *left_out]:
        in_queue(submit_job(member_of(other, f"user-{other.slug}"), other), urgent)
    in_queue(submit_job(member, team), scavenger)

    with django_assert_num_queries(2):  # the queues with the teams they name, then the waiting jobs
        jobs, _ = waiting(now=at(60))

    preempts = {job.team_id: job.preempts for job in jobs}
    assert preempts == {**{t.pk: True for t in named}, **{t.pk: False for t in left_out}, team.pk: False}


def test_a_job_preempted_the_most_times_allowed_is_not_chosen_again(settings, member, team, n1, urgent, scavenger):
    settings.E31_MAX_PREEMPTIONS = 2
    low = running(member, team, scavenger, at_=T0, cpus=2)
    for n in range(2):
        first = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
        schedule_pass(now=at(100 * n + 10))
        low = preempted_by_its_node(low, now=at(100 * n + 20))
        [hold] = schedule_pass(now=at(100 * n + 21))
        assert hold.job_id == first.pk
        actions.cancel(first, now=at(100 * n + 30))  # released before it ran: its cores are free again
        [hold] = schedule_pass(now=at(100 * n + 32))
        assert hold.job_id == low.pk
        low.refresh_from_db()
        assert actions.start_run(low, now=at(100 * n + 33))
    assert low.preemptions == 2
    last = in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)

    assert schedule_pass(now=at(300)) == []

    low.refresh_from_db()
    assert (low.stage, low.preempted_by_id) == (Stage.RUN, None)  # it runs to its end
    last.refresh_from_db()
    assert last.stage == Stage.SUBMIT and "waits for the job it preempted" not in last.wait_reason
    said = "it has been preempted 2 times, the most a job may be (E31_MAX_PREEMPTIONS)"
    assert said in low.reason  # its second requeue said so
    body = api_client_for(member).get(f"/api/v1/jobs/{low.pk}/").json()
    assert (body["preemptions"], body["preemptable"]) == (2, False)


def test_the_job_page_says_why_a_job_is_no_longer_preemptable(settings, client, member, team, n1, urgent, scavenger):
    settings.E31_MAX_PREEMPTIONS = 1
    low = running(member, team, scavenger, at_=T0, cpus=2)
    in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))
    preempted_by_its_node(low, now=at(90))
    client.force_login(member)

    page = client.get(f"/jobs/{low.pk}/").content.decode()

    said = "no: it has been preempted once, the most a job may be (E31_MAX_PREEMPTIONS)"
    assert f'<dd id="preemptable">{said}</dd>' in page


def test_a_preempted_attempt_costs_nothing_and_does_not_count_in_fair_share(member, team, n1, urgent, scavenger):
    low = running(member, team, scavenger, at_=T0, cpus=2)
    in_queue(submit_job(member, team, cpus=2, time_limit_s=600), urgent)
    schedule_pass(now=at(60))

    low = preempted_by_its_node(low, now=at(3600))

    [record] = Record.objects.filter(job_id=low.pk)
    assert (record.outcome, record.cost, record.held_seconds) == (Outcome.PREEMPTED, 0, 3600)  # held, not charged
    assert record.rate_core_hour > 0  # the rate in force is kept: the cost is 0 by the rule, not the rate
    assert usage_now(now=at(3600)) == {}  # its team is not pushed back in the queue for the lost attempt

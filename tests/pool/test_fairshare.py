"""Fair-share: the queue serves first the team that held least lately, and says why a job waits."""

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from accounting.fairshare import usage_now
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.models import Job, Outcome, Stage
from jobs.scheduling.queue import standing, waiting
from pool.models import Node
from pool.nodes import Capacity, register, set_state
from pool.placement.backfill import RESERVATIONS, serve_order
from pool.placement.types import Request, Waiting
from pool.scheduler import fair_share_order, team_usage
from tests.factories import TeamFactory, member_of, run_to_release, submit_job

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
HALF_LIFE = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _half_life(settings):
    settings.E31_FAIRSHARE_HALF_LIFE_S = int(HALF_LIFE.total_seconds())


@pytest.fixture
def blue(other_team):
    return other_team, member_of(other_team, "bea")


def add_node(name: str, *, cpus: int = 4, memory_mb: int = 4096, now: datetime = T0) -> Node:
    return register(name, Capacity(cpu_ids=list(range(cpus)), memory_mb=memory_mb, gpu_ids=[]), now=now)


def used(user, team, *, cpus: int, seconds: float, until: datetime, meter_stop: datetime | None = None) -> Job:
    """A job of `team` that held `cpus` cores for `seconds` up to `until` (or `meter_stop`), then released."""
    job = submit_job(user, team, cpus=cpus, time_limit_s=max(30, int(seconds)))  # metered to the time limit at most
    started = (meter_stop or until) - timedelta(seconds=seconds)
    schedule_pass(now=started)
    job.refresh_from_db()
    assert job.stage == Stage.RENT, "the pool had no room for the usage job"
    if meter_stop is None:
        run_to_release(job, now=until)
    else:  # its node was lost: the meter stopped at the node's last heartbeat
        actions.release_lost(
            job, node_name=job.active_hold.node.name, last_heartbeat=meter_stop, now=until, actor=REAPER
        )
    return job


def order(*, now: datetime) -> list:
    return [w.job_id for w in fair_share_order(waiting(now=now)[0], now=now)]


def explain(job: Job, *, now: datetime) -> SimpleNamespace | None:
    """Where the job stands after a scheduler pass at `now`, as its page and the API show it."""
    schedule_pass(now=now)
    job.refresh_from_db()
    found = standing(job)
    return SimpleNamespace(**found) if found else None


def test_a_team_that_used_a_lot_recently_is_served_after_one_that_used_nothing(member, team, blue):
    blue_team, bea = blue
    add_node("n1", cpus=1)
    used(member, team, cpus=1, seconds=3600, until=T0)
    red_job = submit_job(member, team)  # submitted first
    blue_job = submit_job(bea, blue_team)

    assert order(now=T0) == [blue_job.pk, red_job.pk]
    [hold] = schedule_pass(now=T0)
    assert hold.job == blue_job
    assert Job.objects.get(pk=red_job.pk).stage == Stage.SUBMIT


def test_with_equal_usage_the_older_submission_goes_first(member, team, blue):
    blue_team, bea = blue
    add_node("n1", cpus=2)
    used(member, team, cpus=1, seconds=600, until=T0)
    used(bea, blue_team, cpus=1, seconds=600, until=T0)
    first = submit_job(bea, blue_team)
    second = submit_job(member, team)
    third = submit_job(bea, blue_team)

    assert team_usage(now=T0 + HALF_LIFE) == {team.pk: 300.0, blue_team.pk: 300.0}
    assert order(now=T0 + HALF_LIFE) == [first.pk, second.pk, third.pk]


def test_usage_counts_half_after_one_half_life(member, team):
    add_node("n1")
    used(member, team, cpus=2, seconds=500, until=T0)  # 1000 core-seconds

    assert usage_now(now=T0) == {team.pk: pytest.approx(1000.0)}
    assert usage_now(now=T0 + HALF_LIFE) == {team.pk: pytest.approx(500.0)}
    assert usage_now(now=T0 + 2 * HALF_LIFE) == {team.pk: pytest.approx(250.0)}


def test_the_half_life_is_a_setting(member, team, settings):
    add_node("n1")
    used(member, team, cpus=1, seconds=1000, until=T0)

    settings.E31_FAIRSHARE_HALF_LIFE_S = 60
    assert usage_now(now=T0 + timedelta(minutes=2)) == {team.pk: pytest.approx(250.0)}


def test_old_heavy_usage_decays_below_recent_light_usage(member, team, blue):
    blue_team, bea = blue
    add_node("n1")
    used(member, team, cpus=4, seconds=1000, until=T0)  # 4000 core-seconds, 3 half-lives ago: 500
    now = T0 + 3 * HALF_LIFE
    used(bea, blue_team, cpus=1, seconds=600, until=now)  # 600 core-seconds, just now
    red_job = submit_job(member, team)
    blue_job = submit_job(bea, blue_team)

    assert team_usage(now=now) == {team.pk: pytest.approx(500.0), blue_team.pk: pytest.approx(600.0)}
    assert order(now=now) == [red_job.pk, blue_job.pk]


def test_usage_adds_up_over_records(member, team):
    add_node("n1")
    used(member, team, cpus=1, seconds=100, until=T0)
    used(member, team, cpus=2, seconds=100, until=T0 + HALF_LIFE)

    assert usage_now(now=T0 + HALF_LIFE) == {team.pk: pytest.approx(50.0 + 200.0)}


def test_a_record_metered_to_an_earlier_moment_is_added_as_of_that_moment(member, team):
    # A lost node's record comes in after later ones: its meter stopped at the last heartbeat.
    add_node("n1")
    used(member, team, cpus=1, seconds=400, until=T0 + HALF_LIFE)
    used(member, team, cpus=1, seconds=200, until=T0 + 2 * HALF_LIFE, meter_stop=T0)

    assert usage_now(now=T0 + HALF_LIFE) == {team.pk: pytest.approx(400.0 + 100.0)}
    assert usage_now(now=T0 + 2 * HALF_LIFE) == {team.pk: pytest.approx(200.0 + 50.0)}


def test_a_team_filling_the_pool_now_waits_behind_one_that_is_not(member, team, blue):
    blue_team, bea = blue
    add_node("n1", cpus=2)
    hogs = [submit_job(member, team) for _ in range(3)]
    assert {h.job for h in schedule_pass(now=T0)} == set(hogs[:2])  # red holds the whole pool
    blue_job = submit_job(bea, blue_team)
    later = T0 + timedelta(minutes=10)

    assert team_usage(now=later) == {team.pk: pytest.approx(2 * 600.0)}  # held so far, nothing released yet
    assert order(now=later) == [blue_job.pk, hogs[2].pk]
    add_node("n2", cpus=1, now=later)
    [hold] = schedule_pass(now=later)
    assert hold.job == blue_job


def submitted(job: Job, at: datetime) -> Job:
    Job.objects.filter(pk=job.pk).update(submitted_at=at)
    return job


def test_a_job_waiting_past_the_bound_is_served_before_a_lighter_teams_newer_job(member, team, blue, settings):
    settings.E31_FAIRSHARE_MAX_WAIT_S = 3600
    blue_team, bea = blue
    add_node("n1", cpus=1)
    used(member, team, cpus=1, seconds=3600, until=T0)
    red_job = submitted(submit_job(member, team), T0 - timedelta(hours=1))
    blue_job = submitted(submit_job(bea, blue_team), T0 - timedelta(minutes=10))

    assert order(now=T0) == [red_job.pk, blue_job.pk]
    [hold] = schedule_pass(now=T0)
    assert hold.job == red_job


def test_below_the_bound_the_fair_share_order_holds(member, team, blue, settings):
    settings.E31_FAIRSHARE_MAX_WAIT_S = 3600
    blue_team, bea = blue
    add_node("n1", cpus=1)
    used(member, team, cpus=1, seconds=3600, until=T0)
    red_job = submitted(submit_job(member, team), T0 - timedelta(minutes=59))
    blue_job = submitted(submit_job(bea, blue_team), T0 - timedelta(minutes=10))

    assert order(now=T0) == [blue_job.pk, red_job.pk]


def test_a_bound_of_zero_leaves_the_fair_share_order_alone(member, team, blue, settings):
    settings.E31_FAIRSHARE_MAX_WAIT_S = 0
    blue_team, bea = blue
    add_node("n1", cpus=1)
    used(member, team, cpus=1, seconds=3600, until=T0)
    red_job = submitted(submit_job(member, team), T0 - timedelta(days=3))
    blue_job = submitted(submit_job(bea, blue_team), T0 - timedelta(minutes=10))

    assert order(now=T0) == [blue_job.pk, red_job.pk]


def aged(team_id: int, *, waited: timedelta, priority: int = 0) -> Waiting:
    return Waiting(uuid.uuid4(), team_id, T0 - waited, 1, Request(1, 64, 0), 60, priority=priority)


def test_jobs_past_the_bound_go_by_submit_time_whatever_their_teams_usage():
    heavy, light = aged(1, waited=timedelta(hours=3)), aged(2, waited=timedelta(hours=2))
    fresh = aged(2, waited=timedelta(minutes=5))

    assert serve_order([fresh, light, heavy], {1: 1e6, 2: 10.0}, now=T0, max_wait_s=3600) == [heavy, light, fresh]


def test_a_higher_priority_queue_still_goes_before_jobs_past_the_bound():
    old = aged(1, waited=timedelta(hours=5))
    urgent = aged(1, waited=timedelta(minutes=1), priority=10)

    assert serve_order([old, urgent], {}, now=T0, max_wait_s=3600) == [urgent, old]


def test_teams_take_turns_so_a_light_teams_burst_cannot_keep_a_heavier_teams_job_waiting():
    """Thirty jobs of a team that used little (a schedule's burst) and one of a team that used more: the heavier
    team's job is served second, not thirty-first; the burst keeps its own order."""
    burst = [aged(1, waited=timedelta(seconds=30 - i)) for i in range(30)]
    heavy = aged(2, waited=timedelta(seconds=1))

    served = serve_order([heavy, *reversed(burst)], {1: 10.0, 2: 500.0}, now=T0, max_wait_s=3600)

    assert served[:3] == [burst[0], heavy, burst[1]]
    assert [w for w in served if w is not heavy] == burst


def test_in_each_round_the_team_that_used_less_goes_first():
    red = [aged(1, waited=timedelta(seconds=10 - i)) for i in range(3)]
    blue = [aged(2, waited=timedelta(seconds=20 - i)) for i in range(2)]

    served = serve_order([*blue, *red], {1: 5.0, 2: 50.0}, now=T0, max_wait_s=0)

    assert served == [red[0], blue[0], red[1], blue[1], red[2]]


def test_the_pass_stores_where_each_waiting_job_stands_and_why(member, team):
    add_node("n1", cpus=1)
    held = submit_job(member, team, time_limit_s=30)
    assert explain(held, now=T0) is None  # held by that pass: not waiting
    jobs = [submit_job(member, team, time_limit_s=30) for _ in range(RESERVATIONS + 1)]

    first = explain(jobs[0], now=T0)
    assert (first.position, first.queued) == (1, RESERVATIONS + 1)
    assert first.reason == "reserved: expected to start by 22:01 UTC when n1 frees 1 core"
    assert first.expected_start == T0 + timedelta(seconds=30)  # the held job's time limit runs out
    second = explain(jobs[1], now=T0)
    assert second.reason == "reserved: expected to start by 22:01 UTC on n1, after a reserved job ahead"
    assert second.expected_start == T0 + timedelta(seconds=60)
    past = explain(jobs[RESERVATIONS], now=T0)  # past the reservations a pass makes
    assert (past.position, past.expected_start) == (RESERVATIONS + 1, None)
    assert past.reason == f"needs 1 core; largest free: 0; {RESERVATIONS} jobs ahead in the queue"


def test_a_job_that_fits_but_was_past_the_pass_limit_is_next(member, team):
    add_node("n1", cpus=4)
    first, second = submit_job(member, team), submit_job(member, team)

    [hold] = schedule_pass(now=T0, limit=1)

    assert hold.job == first
    second.refresh_from_db()
    assert (second.queue_position, second.wait_reason) == (1, "next to be held")


def test_the_position_is_read_from_the_job_not_recomputed(member, team, django_assert_max_num_queries):
    add_node("n1", cpus=1)
    submit_job(member, team)
    job = submit_job(member, team)
    schedule_pass(now=T0)
    job.refresh_from_db()

    with django_assert_max_num_queries(1):  # the count of waiting jobs; no ranking of the queue
        assert standing(job)["position"] == 1


def test_a_held_job_leaves_the_queue(member, team):
    add_node("n1", cpus=1)
    job = submit_job(member, team)
    submit_job(member, team)
    explain(job, now=T0)
    first = Job.objects.order_by("submitted_at").first()
    assert (first.queue_position, first.wait_reason) == (None, "")


def test_explain_names_what_a_reserved_job_waits_for(member, team):
    add_node("n1", cpus=6, memory_mb=8192)
    add_node("n2", cpus=8, memory_mb=8192)
    for _ in range(2):
        submit_job(member, team, cpus=4, memory_mb=1024, time_limit_s=600)
    schedule_pass(now=T0)  # one on each node until 22:10: 2 and 4 cores left, 7168 MB on each
    wide = submit_job(member, team, cpus=8)
    deep = submit_job(member, team, cpus=1, memory_mb=8000)

    assert explain(wide, now=T0).reason == "reserved: expected to start by 22:10 UTC when n2 frees 4 cores"
    assert explain(deep, now=T0).reason == "reserved: expected to start by 22:10 UTC when n1 frees 832 MB"
    assert explain(deep, now=T0).position == 2


def test_explain_says_when_no_node_accepts_work(member, team):
    for name in ("n1", "n2"):
        set_state(add_node(name), Node.State.DRAINING, now=timezone.now())
    job = submit_job(member, team)

    waiting = explain(job, now=T0)

    assert waiting.reason.startswith("no node is accepting work")
    assert schedule_pass(now=T0) == []
    assert Job.objects.get(pk=job.pk).stage == Stage.SUBMIT  # draining nodes still count: it may fit later


def test_a_job_no_registered_node_can_hold_is_rejected_by_the_pass_with_the_reason(member, team):
    add_node("n1", cpus=4, memory_mb=2048)
    add_node("n2", cpus=2, memory_mb=8192)
    too_wide = submit_job(member, team, cpus=8)
    too_much_of_both = submit_job(member, team, cpus=4, memory_mb=4096)
    fits = submit_job(member, team, cpus=2, memory_mb=4096)

    [hold] = schedule_pass(now=T0)

    assert hold.job == fits
    for job in (too_wide, too_much_of_both):
        job.refresh_from_db()
        assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.REJECTED)
        assert job.reason.startswith(f"can never be held: needs {job.cpus} cores")
        assert "the largest node has 4 cores, 8192 MB" in job.reason
        assert not job.holds.exists() and not job.records.exists()


def test_a_job_is_rejected_when_the_pool_shrinks_below_it(member, team):
    add_node("n1", cpus=4)
    add_node("n2", cpus=1)
    set_state(Node.objects.get(name="n1"), Node.State.DRAINING, now=timezone.now())
    job = submit_job(member, team, cpus=4)
    assert schedule_pass(now=T0) == [] and Job.objects.get(pk=job.pk).stage == Stage.SUBMIT  # n1 may resume

    add_node("n1", cpus=2, now=T0 + timedelta(minutes=1))  # its worker came back with fewer cores
    schedule_pass(now=T0 + timedelta(minutes=1))

    job.refresh_from_db()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.REJECTED)
    assert "the largest node has 2 cores" in job.reason


def test_the_queue_is_read_in_four_queries_whatever_the_number_of_teams(member, team, django_assert_max_num_queries):
    add_node("n1", cpus=1)
    used(member, team, cpus=1, seconds=60, until=T0)
    for i in range(5):
        other = TeamFactory(slug=f"t{i}")
        submit_job(member_of(other, f"user{i}"), other)

    with django_assert_max_num_queries(4):
        assert len(fair_share_order(waiting(now=T0)[0], now=T0)) == 5

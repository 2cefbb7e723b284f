"""Requests for a platform pass are coalesced: at most one nudge of each task waits in the broker at a time (the
scheduler pass, and the webhook and mail passes that commits ask for with `send_after_commit`).

These tests use the real Redis of this test process's broker, under marker keys of their own (a
worker process of the real-stack tests may take the shared markers at any moment)."""

import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from jobs import tasks
from jobs.scheduling import dispatch
from jobs.scheduling.dispatch import claim_pending  # the real one: in-process tests are given a stand-in
from notify import tasks as notify_tasks
from notify.outbox import SEND_TASK
from webhooks import tasks as webhook_tasks
from webhooks.delivery import TASK as WEBHOOKS_TASK

SCHEDULE = (dispatch.SCHEDULE_TASK, None, None)
WEBHOOKS = (WEBHOOKS_TASK, None, None)
MAIL = (SEND_TASK, None, None)


@pytest.fixture
def marker(monkeypatch):
    """The scheduler pass's marker key (the others share its prefix, and are cleared too)."""
    prefix = f"e31:test-pending:{uuid.uuid4().hex}:"
    monkeypatch.setattr(dispatch, "PENDING_PREFIX", prefix)
    monkeypatch.setattr(dispatch, "claim_pending", claim_pending)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield prefix + dispatch.SCHEDULE_TASK
    for key in broker.scan_iter(f"{prefix}*"):
        broker.delete(key)


@pytest.fixture
def sent(monkeypatch):
    messages: list[tuple] = []
    monkeypatch.setattr(
        dispatch, "send", lambda task, *, args=None, queue=None, eta=None: messages.append((task, args, queue))
    )
    return messages


def test_requests_while_a_nudge_is_pending_send_nothing_more(marker, sent):
    for _ in range(5):
        dispatch.nudge_scheduler()

    assert sent == [SCHEDULE]


def test_a_pass_that_starts_takes_the_marker_so_the_next_request_nudges_again(marker, sent):
    dispatch.nudge_scheduler()
    dispatch.schedule_request_taken()
    dispatch.nudge_scheduler()

    assert sent == [SCHEDULE, SCHEDULE]


def test_the_scheduler_task_takes_the_marker_before_its_pass_reads_the_queue(marker, sent, monkeypatch):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    dispatch.nudge_scheduler()
    seen_by_pass = []
    monkeypatch.setattr(tasks, "schedule_pass", lambda limit: seen_by_pass.append(broker.exists(marker)) or [])

    tasks.schedule_jobs()

    assert seen_by_pass == [0]  # a job committed during the pass finds no marker, and nudges again


def test_the_marker_expires_when_its_nudge_is_never_taken(marker, sent):
    dispatch.nudge_scheduler()

    ttl = redis.Redis.from_url(settings.CELERY_BROKER_URL).ttl(marker)
    assert 0 < ttl <= dispatch.pending_ttl_s(dispatch.SCHEDULE_TASK) == settings.E31_SCHEDULE_EVERY_S


def test_a_nudge_that_cannot_leave_leaves_no_marker_behind(marker, monkeypatch, caplog):
    def broker_down(task, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(dispatch, "send", broker_down)
    dispatch.nudge_scheduler()

    assert not redis.Redis.from_url(settings.CELERY_BROKER_URL).exists(marker)
    assert "the periodic pass will catch up" in caplog.text


def test_a_marker_that_cannot_be_read_nudges_all_the_same(marker, sent, settings, caplog):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there

    dispatch.nudge_scheduler()  # no exception: the submission that asked has committed
    dispatch.nudge_scheduler()

    assert sent == [SCHEDULE, SCHEDULE]
    assert "nudging anyway" in caplog.text


def test_a_broker_url_redis_cannot_read_nudges_all_the_same(marker, sent, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:not-a-port/0"  # redis-py refuses it (ValueError)

    dispatch.nudge_scheduler()

    assert sent == [SCHEDULE]


def test_a_broker_other_than_redis_has_no_marker_and_every_request_nudges(marker, sent, settings):
    settings.CELERY_BROKER_URL = "amqp://guest@127.0.0.1:5672//"

    dispatch.nudge_scheduler()
    dispatch.nudge_scheduler()

    assert sent == [SCHEDULE, SCHEDULE]


def test_the_marker_lasts_no_longer_than_the_periodic_pass_takes_to_come(marker, sent, settings):
    settings.CELERY_BEAT_SCHEDULE = {
        **settings.CELERY_BEAT_SCHEDULE,
        "schedule": {"task": dispatch.SCHEDULE_TASK, "schedule": 7.0},
    }

    dispatch.nudge_scheduler()

    assert 0 < redis.Redis.from_url(settings.CELERY_BROKER_URL).ttl(marker) <= 7


def test_a_pass_that_stops_at_its_limit_asks_for_another(marker, sent, monkeypatch):
    monkeypatch.setattr(tasks, "schedule_pass", lambda limit: [object()] * limit)

    tasks.schedule_jobs()

    assert sent == [SCHEDULE]


def test_a_pass_below_its_limit_asks_for_none(marker, sent, monkeypatch):
    monkeypatch.setattr(tasks, "schedule_pass", lambda limit: [object()] * (limit - 1))

    tasks.schedule_jobs()

    assert sent == []


def test_a_marker_the_task_cannot_clear_does_not_stop_its_pass(marker, sent, settings, monkeypatch):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    passes = []
    monkeypatch.setattr(tasks, "schedule_pass", lambda limit: passes.append(limit) or [])

    tasks.schedule_jobs()

    assert passes == [tasks.PASS_LIMIT]


def test_a_submission_asks_once_its_transaction_commits(member, team, marker, sent, django_capture_on_commit_callbacks):
    from tests.factories import submit_job

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        submit_job(member, team)
        assert sent == []

    for callback in callbacks:
        callback()
    assert sent == [SCHEDULE]


# --- every pass a commit asks for: webhooks and mail --------------------------------------------------


def commit_asking_for(task: str, times: int, django_capture_on_commit_callbacks) -> None:
    """`times` transactions that each ask for a pass of `task` (as each release or redelivery does)."""
    for _ in range(times):
        with django_capture_on_commit_callbacks(execute=True):
            dispatch.send_after_commit(task)


@pytest.mark.parametrize("task", [WEBHOOKS_TASK, SEND_TASK])
def test_passes_asked_for_by_many_commits_wait_one_at_a_time(
    task, db, marker, sent, django_capture_on_commit_callbacks
):
    commit_asking_for(task, 40, django_capture_on_commit_callbacks)

    assert sent == [(task, None, None)]


def test_each_kind_of_pass_has_its_own_marker(db, marker, sent, django_capture_on_commit_callbacks):
    for task in (WEBHOOKS_TASK, SEND_TASK, dispatch.SCHEDULE_TASK):
        commit_asking_for(task, 3, django_capture_on_commit_callbacks)

    assert sent == [WEBHOOKS, MAIL, SCHEDULE]


@pytest.mark.parametrize(
    ("task", "run_pass", "module", "work"),
    [
        (WEBHOOKS_TASK, webhook_tasks.deliver, webhook_tasks, "deliver_due"),
        (SEND_TASK, notify_tasks.send_mail, notify_tasks, "send_waiting"),
    ],
)
def test_a_pass_takes_its_marker_before_it_reads_its_work_so_the_next_commit_asks_again(
    task, run_pass, module, work, db, marker, sent, monkeypatch, django_capture_on_commit_callbacks
):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    commit_asking_for(task, 2, django_capture_on_commit_callbacks)
    seen_by_pass = []

    def read_work(**kwargs):
        seen_by_pass.append(broker.exists(dispatch.pending_key(task)))
        return SimpleNamespace(sent=0)

    monkeypatch.setattr(module, work, read_work)

    run_pass()
    commit_asking_for(task, 2, django_capture_on_commit_callbacks)

    assert seen_by_pass == [0]
    assert sent == [(task, None, None), (task, None, None)]


def test_a_pass_asked_for_at_a_moment_is_never_held_back(
    db, marker, sent, monkeypatch, django_capture_on_commit_callbacks
):
    at = []
    monkeypatch.setattr(dispatch, "send", lambda task, *, args=None, queue=None, eta=None: at.append((task, eta)))
    moments = [timezone.now() + timedelta(seconds=s) for s in (30, 60)]
    for moment in moments:
        with django_capture_on_commit_callbacks(execute=True):
            dispatch.request_schedule_at(moment)

    assert at == [(dispatch.SCHEDULE_TASK, moment) for moment in moments]


def test_a_task_beat_does_not_run_is_sent_at_every_request(db, marker, sent, django_capture_on_commit_callbacks):
    commit_asking_for("tests.not_in_beat", 2, django_capture_on_commit_callbacks)

    assert sent == [("tests.not_in_beat", None, None)] * 2

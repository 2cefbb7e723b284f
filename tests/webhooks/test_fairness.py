"""What a pass sends next: teams take turns whatever their numbers, a team's webhooks take turns, one
attempt at a time per receiver (the address and port a request reaches) across passes, and a webhook that
failed waits out its backoff before any of its deliveries is tried again. The pass's steps (`_claim`) and
records (`_record`) are driven here with a clock of the test's, the receivers' leases on the database's;
the real sockets are in test_silent_receivers.py and test_delivery.py."""

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils import timezone

from tests.factories import webhook_of
from tests.workers import concurrently, wait_until
from webhooks.delivery import (
    GIVE_UP_AFTER,
    RECEIVER_LEASE,
    Attempt,
    _claim,
    _record,
    deliver_due,
    enqueue,
    give_up_stale,
    redeliver,
    webhook_backoff,
)
from webhooks.models import Delivery, ReceiverLease, Webhook

pytestmark = pytest.mark.usefixtures("webhooks_on")

OK = Attempt("2xx", 200, 12)
SILENT = Attempt("no answer", None, 5000)


def hooks(team, user, count, *, port=19001, same_receiver=False):
    """`count` webhooks of `team`, each with one pending delivery; on receivers of their own unless told."""
    made = [
        webhook_of(team, user, f"http://127.0.0.1:{port if same_receiver else port + i}/{team.slug}/{i}")[0]
        for i in range(count)
    ]
    enqueue(team.pk, "job.released", {"team": team.slug}, now=timezone.now() - timedelta(seconds=1))
    return made


class Clock:
    """A moment that moves on a millisecond at each reading, so each claim is later than the last."""

    def __init__(self):
        self.now = timezone.now()

    def __call__(self, later=timedelta(milliseconds=1)):
        self.now += later
        return self.now


def test_teams_take_turns_whatever_their_numbers(member, team, outsider, other_team):
    hooks(team, member, 30)
    hooks(other_team, outsider, 2, port=19500)
    clock = Clock()

    claims = [_claim(clock()) for _ in range(6)]

    assert [c.delivery.webhook.team.slug for c in claims] == ["red", "blue", "red", "blue", "red", "red"]


def test_a_teams_webhooks_take_turns(member, team):
    first, second = hooks(team, member, 2)
    for _ in range(2):
        enqueue(team.pk, "job.released", {}, now=timezone.now() - timedelta(seconds=1))
    clock = Clock()

    order = []
    for _ in range(6):
        claim = _claim(clock())
        order.append(claim.delivery.webhook)
        _record(claim, OK, now=clock())

    assert order == [first, second] * 3
    assert _claim(clock()) is None


def test_one_attempt_at_a_time_per_receiver_whatever_the_path_or_team(member, team, outsider, other_team):
    (red,) = hooks(team, member, 1)
    (blue,) = hooks(other_team, outsider, 1)  # the same address and port: 127.0.0.1:19001, another path
    enqueue(team.pk, "job.released", {}, now=timezone.now() - timedelta(seconds=1))
    clock = Clock()

    first = _claim(clock())
    assert first.delivery.webhook == red and first.receiver == "127.0.0.1:19001"
    assert _claim(clock()) is None  # both teams wait for the attempt under way

    _record(first, OK, now=clock())

    second = _claim(clock())
    assert second.delivery.webhook == blue  # red has another due, but blue's turn comes first
    assert not ReceiverLease.objects.exclude(holder=second.holder).exists()
    assert Delivery.objects.filter(webhook=blue, attempts=1).count() == 1  # its turn given back cost no attempt


def test_a_team_stays_served_when_another_pass_gives_back_its_second_claim(
    transactional_db, member, team, outsider, other_team
):
    """Two passes claim two deliveries of red's webhook at once: the first takes the receiver, the second,
    finding it held, gives its claim back. Red was served all the same, so once its attempt ends blue's
    delivery to that receiver goes before red's next."""
    hooks(team, member, 2, same_receiver=True)
    enqueue(team.pk, "job.released", {}, now=timezone.now() - timedelta(seconds=1))  # two due for each
    (blue,) = hooks(other_team, outsider, 1)  # the same receiver, 127.0.0.1:19001
    clock = Clock()
    first_claimed = threading.Event()
    claims = {}

    def first_pass():
        with transaction.atomic():  # its claim and lease committed only once the second pass is under way
            claims["first"] = _claim(clock())
            first_claimed.set()
            wait_until(_waiting_on_a_lock, 10, 0.01, "the second pass to wait for the first")

    def second_pass():
        first_claimed.wait(10)
        claims["second"] = _claim(clock())

    assert concurrently(first_pass, second_pass) == []
    first, second = claims["first"], claims["second"]
    assert first is not None and second is None  # the second given back: the receiver was held
    assert Delivery.objects.filter(attempts=1).get() == first.delivery

    _record(first, SILENT, now=clock())

    assert _claim(clock()).delivery.webhook == blue


def _waiting_on_a_lock() -> bool:
    """Whether a statement of this test's database waits on a row's lock (another xdist worker's
    tests use another database). Asked inside a transaction too: the activity it read last is dropped first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_a_receiver_held_by_another_process_waits_until_its_lease_ends(member, team):
    (webhook,) = hooks(team, member, 1)
    ReceiverLease.objects.create(receiver="127.0.0.1:19001", holder=uuid.uuid4(), until=Now() + RECEIVER_LEASE)

    assert _claim(timezone.now()) is None  # its URL resolved, its receiver found held: given back
    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.next_attempt_at <= timezone.now()) == (0, True)
    webhook.refresh_from_db()
    assert (webhook.receiver, webhook.last_attempt_at) == ("127.0.0.1:19001", None)
    assert _claim(timezone.now()) is None  # left alone while that receiver is held

    ReceiverLease.objects.update(until=Now())  # that process died mid-attempt, and its lease has run out
    claim = _claim(timezone.now())
    assert claim is not None and ReceiverLease.objects.get().holder == claim.holder


def test_a_receivers_lease_runs_on_the_databases_clock_whatever_the_workers_say(member, team, outsider, other_team):
    """A pass whose clock is a minute behind (or whose moment was read before a long wait for SQLite's lock)
    still holds the receiver RECEIVER_LEASE from when it took it; one whose clock is a minute ahead cannot
    take over that live lease."""
    hooks(team, member, 1)
    hooks(other_team, outsider, 1)  # the same receiver, 127.0.0.1:19001
    behind = timezone.now() - timedelta(minutes=1)
    Delivery.objects.update(next_attempt_at=behind)

    first = _claim(behind)

    assert first is not None
    assert ReceiverLease.objects.filter(until__gt=Now() + RECEIVER_LEASE - timedelta(seconds=2)).exists()
    assert _claim(timezone.now() + timedelta(minutes=1)) is None
    assert ReceiverLease.objects.get().holder == first.holder


def test_a_pass_whose_due_receivers_are_all_held_elsewhere_ends_at_once(member, team):
    """The pass holding the receiver sends what waits for it as its attempt ends: a pass more, kicked by each
    redelivery, would only hold a worker's slot."""
    hooks(team, member, 1)
    ReceiverLease.objects.create(receiver="127.0.0.1:19001", holder=uuid.uuid4(), until=Now() + RECEIVER_LEASE)
    began = time.monotonic()

    assert deliver_due() == 0

    assert time.monotonic() - began < 2
    assert Delivery.objects.get().attempts == 0


def test_forty_redeliveries_to_a_silent_receiver_are_tried_one_backoff_at_a_time(member, team):
    (webhook,) = hooks(team, member, 1)
    first = Delivery.objects.get()
    start = timezone.now()
    for _ in range(40):
        redeliver(first, now=start)

    tried_at = []
    moment = start
    while moment < start + timedelta(minutes=10):
        if (claim := _claim(moment)) is not None:
            assert _claim(moment) is None  # never two at once
            tried_at.append((moment - start).total_seconds())
            _record(claim, SILENT, now=moment)
        moment += timedelta(seconds=5)

    # 30 s after the first failure, then 60 s, 120 s, 240 s: 5 attempts in 10 minutes, not 41.
    assert tried_at == [0, 30, 90, 210, 450]
    webhook.refresh_from_db()
    # The fifth failure, at 450 s, is waited out for 480 s (30 s doubled four times).
    assert webhook.failures == 5 and webhook.retry_at == start + timedelta(seconds=450 + 480)
    assert Delivery.objects.filter(attempts=0).count() == 36


def test_a_success_ends_the_webhooks_backoff(member, team):
    (webhook,) = hooks(team, member, 1)
    enqueue(team.pk, "job.released", {}, now=timezone.now() - timedelta(seconds=1))
    start = timezone.now()
    _record(_claim(start), SILENT, now=start)

    assert _claim(start + timedelta(seconds=29)) is None
    later = start + timedelta(seconds=30)
    _record(_claim(later), OK, now=later)

    webhook.refresh_from_db()
    assert (webhook.failures, webhook.retry_at) == (0, None)
    assert _claim(later) is not None  # the webhook's next delivery goes at once


def test_the_webhooks_backoff_doubles_up_to_an_hour():
    assert [webhook_backoff(n).total_seconds() for n in range(1, 10)] == [
        30, 60, 120, 240, 480, 960, 1920, 3600, 3600,
    ]  # fmt: skip
    assert webhook_backoff(10_000) == timedelta(hours=1)


def test_a_paused_webhook_or_one_backing_off_holds_no_other_back(member, team, outsider, other_team):
    paused, waiting = hooks(team, member, 2)
    (ready,) = hooks(other_team, outsider, 1, port=19500)
    now = timezone.now()
    Webhook.objects.filter(pk=paused.pk).update(active=False)
    Webhook.objects.filter(pk=waiting.pk).update(failures=1, retry_at=now + timedelta(seconds=30))

    claim = _claim(now)

    assert claim.delivery.webhook == ready
    assert _claim(now) is None


def test_deliveries_kept_a_day_by_their_webhooks_backoff_are_given_up(member, team, teammate):
    (webhook,) = hooks(team, member, 1)
    now = timezone.now()
    Delivery.objects.update(created_at=now - GIVE_UP_AFTER - timedelta(seconds=1), next_attempt_at=now)
    under_way = Delivery.objects.create(
        webhook=webhook, event="job.released", payload={}, created_at=now - timedelta(days=2),
        next_attempt_at=now + timedelta(minutes=5), attempts=3,
    )  # fmt: skip
    paused, _ = webhook_of(team, teammate, "http://127.0.0.1:19002/paused")
    Webhook.objects.filter(pk=paused.pk).update(active=False)
    Delivery.objects.create(
        webhook=paused, event="job.released", payload={}, created_at=now - timedelta(days=2), next_attempt_at=now
    )

    assert give_up_stale(now) == 1

    assert set(Delivery.objects.values_list("webhook", "status")) == {
        (webhook.pk, "failed"), (webhook.pk, "pending"), (paused.pk, "pending"),
    }  # fmt: skip
    assert Delivery.objects.get(pk=under_way.pk).status == "pending"


def test_a_pass_sends_several_at_once(receivers, member, team, settings):
    settings.E31_WEBHOOK_IN_FLIGHT = 4
    slow = [receivers(delay_s=1.5) for _ in range(4)]
    for receiver in slow:
        webhook_of(team, member, receiver.url)
    enqueue(team.pk, "job.released", {}, now=timezone.now())
    began = timezone.now()

    assert deliver_due() == 4

    assert (timezone.now() - began).total_seconds() < 3 * 1.5  # one after the other takes 6 s
    assert all(len(r.received) == 1 for r in slow)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}
    assert not ReceiverLease.objects.exists()

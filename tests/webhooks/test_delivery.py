"""Deliveries sent to real HTTP receivers on loopback: signed, retried with backoff on a non-2xx or a
timeout, given up after a day, one at a time to a receiver whatever the URL calls it, redirects followed
only on the receiver leased."""

import json
import logging
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from tests.conftest import ROOT
from tests.factories import webhook_of
from tests.webhooks.http_receiver import verify
from webhooks.delivery import LEASE, deliver_due, enqueue
from webhooks.models import Delivery, ReceiverLease, Webhook

pytestmark = pytest.mark.usefixtures("webhooks_on")

PAYLOAD = {"id": "0b5e", "name": "nightly", "outcome": "failed"}


def one_delivery(team, member, receiver, *, at=None):
    webhook, secret = webhook_of(team, member, receiver.url)
    receiver.secret = secret
    return enqueue(team.pk, "job.released", PAYLOAD, now=at or timezone.now())[0]


def test_a_delivery_is_signed_so_the_receiver_can_verify_it(receivers, member, team):
    receiver = receivers()
    delivery = one_delivery(team, member, receiver)

    assert deliver_due() == 1

    (got,) = receiver.received
    assert got.signed and got.path == "/hook"
    assert got.headers["X-E31-Event"] == "job.released"
    assert got.headers["X-E31-Delivery"] == str(delivery.delivery_id)
    assert got.headers["Content-Type"] == "application/json"
    assert abs(int(got.headers["X-E31-Timestamp"]) - timezone.now().timestamp()) < 60
    assert json.loads(got.body) == {"event": "job.released", "delivery": str(delivery.delivery_id), "data": PAYLOAD}
    assert not verify("another secret", got.headers, got.body)
    assert not verify(receiver.secret, got.headers, got.body.replace(b"failed", b"succeeded"))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_class, delivery.response_code, delivery.attempts) == (
        "delivered", "2xx", 200, 1,
    )  # fmt: skip
    assert delivery.delivered_at is not None and delivery.next_attempt_at is None
    assert 0 <= delivery.duration_ms < 5000


def test_a_500_is_retried_after_a_backoff_then_delivered(receivers, member, team):
    receiver = receivers(answers=[500, 200])
    start = timezone.now()
    delivery = one_delivery(team, member, receiver, at=start)

    with time_machine.travel(start, tick=False):
        assert deliver_due() == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_class, delivery.response_code, delivery.attempts) == (
        "pending", "5xx", 500, 1,
    )  # fmt: skip
    assert delivery.next_attempt_at == start + timedelta(seconds=30)

    with time_machine.travel(start + timedelta(seconds=29), tick=False):
        assert deliver_due() == 0  # not due yet
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        assert deliver_due() == 1

    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_code, delivery.attempts) == ("delivered", 200, 2)
    assert [r.headers["X-E31-Delivery"] for r in receiver.received] == [str(delivery.delivery_id)] * 2
    assert all(r.signed for r in receiver.received)


def test_the_backoff_doubles(receivers, member, team):
    receiver = receivers(answers=[500])
    start = timezone.now()
    delivery = one_delivery(team, member, receiver, at=start)

    moment = start
    waits = []
    for _ in range(4):
        with time_machine.travel(moment, tick=False):
            deliver_due()
        delivery.refresh_from_db()
        waits.append((delivery.next_attempt_at - moment).total_seconds())
        moment = delivery.next_attempt_at

    assert waits == [30, 60, 120, 240] and delivery.attempts == 4


def test_a_delivery_failing_for_a_day_is_given_up(receivers, member, team):
    receiver = receivers(answers=[503])
    start = timezone.now()
    delivery = one_delivery(team, member, receiver, at=start)
    Delivery.objects.filter(pk=delivery.pk).update(attempts=11, next_attempt_at=start + timedelta(hours=23))

    with time_machine.travel(start + timedelta(hours=23), tick=False):
        deliver_due()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("failed", 12, 503)
    assert delivery.next_attempt_at is None
    with time_machine.travel(start + timedelta(days=2), tick=False):
        assert deliver_due() == 0


def test_a_receiver_slower_than_5_s_is_a_timeout_retried(receivers, member, team):
    receiver = receivers(delay_s=8)
    delivery = one_delivery(team, member, receiver)

    assert deliver_due() == 1

    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_class, delivery.response_code, delivery.attempts) == (
        "pending", "no answer", None, 1,
    )  # fmt: skip
    assert 5000 <= delivery.duration_ms < 8000
    assert len(receiver.received) == 1


def test_aliases_of_one_receiver_get_one_attempt_at_a_time(receivers, member, team, outsider, other_team, settings):
    """Two teams' webhooks name one receiver four ways; a pass with room for all of them at once still sends
    them one after the other (each answer takes 0.3 s)."""
    settings.E31_WEBHOOK_IN_FLIGHT = 8
    receiver = receivers(delay_s=0.3)
    aliases = ["127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1"]
    for i, host in enumerate(aliases):
        owner, by = (team, member) if i % 2 else (other_team, outsider)
        webhook_of(owner, by, f"http://{host}:{receiver.port}/{i}")
    for owner in (team, other_team):
        enqueue(owner.pk, "job.released", PAYLOAD, now=timezone.now())

    assert deliver_due() == 4

    assert sorted(r.path for r in receiver.received) == ["/0", "/1", "/2", "/3"]
    assert receiver.most_open == 1
    assert set(Delivery.objects.values_list("status", "attempts")) == {("delivered", 1)}
    assert set(Webhook.objects.values_list("receiver", flat=True)) == {f"127.0.0.1:{receiver.port}"}
    assert not ReceiverLease.objects.exists()


def test_a_redirect_on_the_same_receiver_is_followed_and_signed_again(receivers, member, team):
    receiver = receivers(answers=[307, 200])
    receiver.location = f"http://2130706433:{receiver.port}/moved?x=1"  # another spelling of its address
    delivery = one_delivery(team, member, receiver)

    deliver_due()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_code) == ("delivered", 200)
    first, moved = receiver.received
    assert (first.path, moved.path) == ("/hook", "/moved?x=1")
    assert moved.signed and moved.body == first.body


def test_a_redirect_to_another_receiver_is_not_followed(receivers, member, team, caplog):
    """Its lease is the first receiver's: another one may have an attempt of ours under way already."""
    elsewhere = receivers()  # allowed, on another port
    first = receivers(answers=[307], location=elsewhere.url)
    delivery = one_delivery(team, member, first)

    with caplog.at_level(logging.INFO, logger="webhooks.delivery"):
        deliver_due()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_class, delivery.response_code) == ("pending", "3xx", 307)
    assert len(first.received) == 1 and elsewhere.received == []
    assert f"a redirect to 127.0.0.1:{elsewhere.port}, not 127.0.0.1:{first.port}" in caplog.text


def test_a_redirect_to_a_host_not_allowed_is_not_followed(receivers, member, team):
    elsewhere = receivers(host="127.0.0.2")
    first = receivers(answers=[302], location=elsewhere.url)
    delivery = one_delivery(team, member, first)

    deliver_due()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_class, delivery.response_code) == ("pending", "not allowed", 302)
    assert elsewhere.received == []


def test_a_location_no_parser_takes_fails_its_delivery_and_stops_no_other(receivers, member, team):
    broken = receivers(answers=[302], location="http://[::1/")
    fine = receivers()
    first = one_delivery(team, member, broken)
    Delivery.objects.exclude(pk=first.pk).delete()
    one_delivery(team, member, fine)  # to both webhooks: keep the new one's to the fine receiver
    second = Delivery.objects.get(webhook__url=fine.url)
    Delivery.objects.exclude(pk__in=[first.pk, second.pk]).delete()

    assert deliver_due() == 2

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.attempts, first.status_class, first.response_code) == ("pending", 1, "3xx", 302)
    assert second.status == "delivered" and len(fine.received) == 1


def test_too_many_redirects_are_a_failed_attempt(receivers, member, team):
    loop = receivers(answers=[302])
    loop.location = loop.url
    delivery = one_delivery(team, member, loop)

    deliver_due()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_class, delivery.response_code) == ("pending", "3xx", 302)
    assert len(loop.received) == 4  # the first request and 3 redirects


def test_a_host_taken_off_the_allow_list_is_not_reached(receivers, member, team, settings):
    receiver = receivers()
    delivery = one_delivery(team, member, receiver)
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["10.0.0.0/8"]

    deliver_due()

    delivery.refresh_from_db()
    assert receiver.received == [] and (delivery.status_class, delivery.response_code) == ("not allowed", None)


def test_nothing_is_sent_while_webhooks_are_off(receivers, member, team, settings):
    receiver = receivers()
    delivery = one_delivery(team, member, receiver)
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []

    assert deliver_due() == 0

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, receiver.received) == ("pending", 0, [])


def test_a_claimed_delivery_is_not_sent_twice_until_its_lease_ends(receivers, member, team):
    receiver = receivers()
    start = timezone.now()
    delivery = one_delivery(team, member, receiver, at=start)
    # A pass claimed it and died mid-request.
    Delivery.objects.filter(pk=delivery.pk).update(attempts=1, next_attempt_at=start + LEASE)

    with time_machine.travel(start + timedelta(seconds=10), tick=False):
        assert deliver_due() == 0
    with time_machine.travel(start + LEASE, tick=False):
        assert deliver_due() == 1

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_a_paused_webhooks_deliveries_wait(receivers, member, team):
    receiver = receivers()
    delivery = one_delivery(team, member, receiver)
    delivery.webhook.__class__.objects.filter(pk=delivery.webhook_id).update(active=False)

    assert deliver_due() == 0
    assert receiver.received == []


def test_the_verification_snippet_of_the_docs_verifies_a_delivery(receivers, member, team):
    text = (ROOT / "docs" / "api.md").read_text().split("## Webhooks", 1)[1]
    snippet = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(snippet, namespace)
    receiver = receivers()
    one_delivery(team, member, receiver)

    deliver_due()

    (got,) = receiver.received
    assert namespace["verify"](receiver.secret, got.headers, got.body)
    assert not namespace["verify"](receiver.secret, got.headers, got.body + b" ")


def test_a_pass_stops_at_its_limits_and_leaves_the_rest_due(receivers, member, team):
    receiver = receivers()
    webhook, receiver.secret = webhook_of(team, member, receiver.url)
    for _ in range(3):
        enqueue(team.pk, "job.released", PAYLOAD, now=timezone.now())

    assert deliver_due(limit=2) == 2
    assert deliver_due(seconds=0) == 0  # out of time before the first
    assert deliver_due() == 1

    assert len(receiver.received) == 3 and all(r.signed for r in receiver.received)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}

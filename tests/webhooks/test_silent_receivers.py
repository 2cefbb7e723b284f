"""One team's silent receiver (it accepts and never answers) with 20 failing webhooks and 40 redeliveries
pending cannot hold up another team's webhook: real receivers on loopback, two passes running at once in
threads of their own as two platform workers would, the other team's delivery written while they are busy.
The failing webhooks name their receivers four ways, as a team spreading them over aliases would."""

import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from tests.factories import webhook_of
from tests.webhooks.http_receiver import ALLOWED
from webhooks.delivery import TIMEOUT_S, deliver_due, enqueue, redeliver
from webhooks.models import Delivery, ReceiverLease

# A slot's deadline, and room for a busy machine (two cores shared with the rest of the suite).
PROMPTLY_S = TIMEOUT_S + 2
ALIASES = ["127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1"]  # all 127.0.0.1


class Passes:
    """Passes of `webhooks.deliver` in threads, each with its own database connection, as separate workers."""

    def __init__(self, count: int, seconds: float) -> None:
        self.threads = [threading.Thread(target=self.run, args=(seconds,), daemon=True) for _ in range(count)]

    def run(self, seconds: float) -> None:
        try:
            deliver_due(seconds=seconds)
        finally:
            connection.close()

    def __enter__(self) -> "Passes":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for thread in self.threads:
            thread.join(60)


def wait_until(condition, timeout: float, what: str) -> float:
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < timeout, f"waited {timeout} s for {what}"
        time.sleep(0.01)
    return time.monotonic() - began


@pytest.mark.parametrize("silent_receivers", [1, 20], ids=["one silent receiver", "twenty silent receivers"])
def test_a_good_teams_webhook_arrives_promptly_while_another_team_keeps_a_silent_receiver_busy(
    transactional_db, receivers, settings, member, team, outsider, other_team, silent_receivers
):
    """With one silent receiver it also takes the good team's (the same address and port, another path): one
    attempt at a time goes there, so the good delivery waits for the one under way, then is next. With
    twenty, every slot of both passes is taken by a silent attempt and the good one gets the first freed."""
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [ALLOWED]
    silent = [receivers(silent_paths=("/silent",)) for _ in range(silent_receivers)]
    for i in range(20):
        webhook_of(team, member, f"http://{ALIASES[i % 4]}:{silent[i % silent_receivers].port}/silent/{i}")
    first = enqueue(team.pk, "job.released", {"id": "bad"}, now=timezone.now())[0]
    for _ in range(40):
        redeliver(first, now=timezone.now())
    good = silent[0]  # the worst case: the receiver the silent webhooks hold
    webhook, good.secret = webhook_of(other_team, outsider, good.url_at("/good"))

    with Passes(2, seconds=2 * TIMEOUT_S):
        busy = min(silent_receivers, 2 * settings.E31_WEBHOOK_IN_FLIGHT)
        wait_until(lambda: sum(r.open_now for r in silent) == busy, 10, "the passes to be busy")
        enqueue(other_team.pk, "job.released", {"id": "good"}, now=timezone.now())  # committed: a job released
        took = wait_until(lambda: good.on("/good"), 3 * TIMEOUT_S, "the good team's delivery")
        print(f"\nthe good team's delivery arrived {took:.2f} s after its release ({silent_receivers} silent)")

    assert took < PROMPTLY_S
    (got,) = good.on("/good")
    assert got.signed
    assert Delivery.objects.get(webhook=webhook).status == "delivered"
    # One attempt at a time per receiver, across both passes; after its failed attempt each silent webhook
    # waits out its backoff (30 s, longer than this test) while its other deliveries, the redeliveries, wait.
    assert all(r.most_open == 1 for r in silent)
    tried = Delivery.objects.filter(webhook__team=team, attempts__gt=0)
    assert tried.count() == tried.values("webhook").distinct().count() == sum(len(r.received) for r in silent) - 1
    assert set(tried.values_list("attempts", "status_class")) == {(1, "no answer")}
    assert not ReceiverLease.objects.exists()

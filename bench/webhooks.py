"""Webhooks (issue 34): what a team's webhooks cost the others, and where the caps' defaults come from.

1. A release writes one delivery per webhook of its team that asked for the event, inside the release's
   transaction: timed for 1, 20, 50 and 100 webhooks (`enqueue_<n>_webhooks_ms`, median of 10): the cost
   E31_TEAM_MAX_WEBHOOKS bounds.
2. A pass's choice of what to send next (`webhooks.delivery._claim`, fairness and leases included) with
   20 to 5,000 webhooks due at once (`claim_<n>_due_ms`, median of up to 40).
3. A pass's throughput to fast receivers on loopback, one receiver (one at a time) and eight
   (`pass_one_receiver_per_s`, `pass_eight_receivers_per_s`): what a webhook's redeliveries
   (E31_WEBHOOK_REDELIVERIES_PER_MINUTE) are measured against.
4. One team's 20 webhooks and 40 redeliveries to a receiver that accepts and never answers, two passes
   running as two workers would, and another team's delivery to the same host and port written while
   they are busy: from its commit to its arrival (`good_team_wait_s`).

Prints the headline figures last. Run from the repository's root: .venv/bin/python bench/webhooks.py [--quick]
"""

import argparse
import os
import statistics
import threading
import time
from datetime import timedelta

from _setup import BROKER_DB, machine, throwaway_database

PAYLOAD = {"id": "0b5e3c1e-0000-4000-8000-000000000000", "name": "nightly", "outcome": "failed", "exit_code": 3}


def webhooks_of(team, urls):
    from django.utils import timezone

    from webhooks.models import Webhook

    made = []
    for url in urls:
        webhook = Webhook(team=team, events=["job.released"], secret="s" * 43, created_at=timezone.now())
        webhook.aim_at(url)
        made.append(webhook)
    return Webhook.objects.bulk_create(made)


def empty() -> None:
    from webhooks.models import Delivery, ReceiverLease, Webhook

    Delivery.objects.all().delete()
    Webhook.objects.all().delete()
    ReceiverLease.objects.all().delete()


def enqueue_ms(team, count: int) -> float:
    from django.db import transaction
    from django.utils import timezone

    from webhooks.delivery import enqueue

    empty()
    webhooks_of(team, [f"http://127.0.0.1:{19000 + i}/hook" for i in range(count)])
    times = []
    for _ in range(10):
        began = time.perf_counter()
        with transaction.atomic():
            enqueue(team.pk, "job.released", PAYLOAD, now=timezone.now())
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def claim_ms(teams, per_team: int) -> float:
    from django.db import connection
    from django.utils import timezone

    from webhooks.delivery import Attempt, _claim, _record
    from webhooks.models import Delivery

    empty()
    at = timezone.now() - timedelta(seconds=1)
    port = 19000
    for team in teams:
        made = webhooks_of(team, [f"http://127.0.0.1:{port + i}/hook" for i in range(per_team)])
        port += per_team
        Delivery.objects.bulk_create(
            Delivery(webhook=w, event="job.released", payload=PAYLOAD, created_at=at, next_attempt_at=at) for w in made
        )
    connection.cursor().execute("ANALYZE webhooks_webhook, webhooks_delivery")
    times, claims = [], []
    for _ in range(min(40, len(teams) * per_team)):  # each claim holds its receiver: one per webhook
        began = time.perf_counter()
        claim = _claim(timezone.now())
        times.append((time.perf_counter() - began) * 1000)
        assert claim is not None
        claims.append(claim)
    for claim in claims:
        _record(claim, Attempt("2xx", 200, 1), now=timezone.now())
    return statistics.median(times)


def pass_per_s(team, receivers: int, per_receiver: int) -> float:
    from django.utils import timezone

    from tests.webhooks.http_receiver import Receiver
    from webhooks.delivery import deliver_due
    from webhooks.models import Delivery

    empty()
    started = [Receiver().start() for _ in range(receivers)]
    try:
        at = timezone.now()
        made = webhooks_of(team, [r.url for r in started])
        Delivery.objects.bulk_create(
            [
                Delivery(webhook=w, event="job.released", payload=PAYLOAD, created_at=at, next_attempt_at=at)
                for w in made
                for _ in range(per_receiver)
            ]
        )
        began = time.perf_counter()
        sent = 0
        while sent < receivers * per_receiver:
            sent += deliver_due(seconds=300)
        took = time.perf_counter() - began
        assert Delivery.objects.filter(status="delivered").count() == receivers * per_receiver
        return sent / took
    finally:
        for receiver in started:
            receiver.stop()


def good_team_wait_s(bad, good) -> float:
    from django.db import connection
    from django.utils import timezone

    from tests.webhooks.http_receiver import Receiver
    from webhooks.delivery import TIMEOUT_S, deliver_due, enqueue, redeliver

    empty()
    receiver = Receiver(silent_paths=("/silent",)).start()
    try:
        webhooks_of(bad, [receiver.url_at(f"/silent/{i}") for i in range(20)])
        first = enqueue(bad.pk, "job.released", PAYLOAD, now=timezone.now())[0]
        for _ in range(40):
            redeliver(first, now=timezone.now())
        webhooks_of(good, [receiver.url_at("/good")])

        def one_pass() -> None:
            try:
                deliver_due(seconds=2 * TIMEOUT_S)
            finally:
                connection.close()

        passes = [threading.Thread(target=one_pass) for _ in range(2)]
        for thread in passes:
            thread.start()
        while receiver.open_now == 0:
            time.sleep(0.01)
        enqueue(good.pk, "job.released", PAYLOAD, now=timezone.now())
        began = time.monotonic()
        while not receiver.on("/good"):
            if time.monotonic() - began > 60:
                raise SystemExit("the good team's delivery did not arrive within 60 s")
            time.sleep(0.01)
        waited = time.monotonic() - began
        for thread in passes:
            thread.join()
        return waited
    finally:
        receiver.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    quick = parser.parse_args().quick
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{BROKER_DB}"  # the kicks of enqueue go there
    os.environ["E31_WEBHOOK_ALLOWED_HOSTS"] = "127.0.0.1:19000-29999"
    throwaway_database("e31_bench_webhooks")
    from teams.people import create_team
    from tests.workers import purge_broker

    print(machine())
    bad, _ = create_team("bench-bad")
    good, _ = create_team("bench-good")
    figures: dict[str, tuple[float, str]] = {}
    for count in (1, 20, 50) if quick else (1, 20, 50, 100):
        figures[f"enqueue_{count}_webhooks_ms"] = (enqueue_ms(bad, count), "ms")
    for teams, per_team in ((1, 20), (10, 50)) if quick else ((1, 20), (10, 50), (100, 50)):
        many = [create_team(f"bench-{teams}-{i}")[0] for i in range(teams)]
        figures[f"claim_{teams * per_team}_due_ms"] = (claim_ms(many, per_team), "ms")
    figures["pass_one_receiver_per_s"] = (pass_per_s(bad, 1, 40 if quick else 200), "deliveries/s")
    figures["pass_eight_receivers_per_s"] = (pass_per_s(bad, 8, 5 if quick else 25), "deliveries/s")
    figures["good_team_wait_s"] = (good_team_wait_s(bad, good), "s")
    empty()
    purge_broker(os.environ["CELERY_BROKER_URL"])
    for name, (value, unit) in figures.items():
        print(f"{name}: {value:.1f} {unit}")


if __name__ == "__main__":
    main()

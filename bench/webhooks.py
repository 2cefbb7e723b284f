"""Webhooks (issue 34): what a team's webhooks cost the others, and where the caps' defaults come from.

1. A release writes one delivery per webhook of its team that asked for the event, inside the release's
   transaction (`webhooks.delivery.enqueue`, its commit and its kick included), with each count of webhooks
   in `--webhooks`, beside a plain bulk_create of as many delivery rows in a transaction of its own
   (`anchor_bulk_create_ms`, `enqueue_ms`, at the largest count; medians of `--repeats`, the two
   alternated): the cost E31_TEAM_MAX_WEBHOOKS bounds.
2. A pass's choice of what to send next (`webhooks.delivery._claim`: the fair order, the receiver's lease,
   the delivery's) with each count in `--due` of deliveries due at once, one per webhook, each team at
   E31_TEAM_MAX_WEBHOOKS webhooks, beside a plain outbox's claim of the same rows (the oldest due delivery by
   the index `delivery_due`, locked with SKIP LOCKED and leased by an UPDATE, in one transaction)
   (`anchor_oldest_due_claim_ms`, `claim_ms`, at the largest count; medians of up to 40 claims each).
3. A pass's throughput to fast receivers on loopback: `--deliveries` to one receiver (one attempt at a time
   goes to a receiver) and as many spread over `--receivers` receivers, beside plain httpx POSTs of the same
   data to the one receiver, one at a time (`anchor_posts_per_s`, `pass_one_receiver_per_s`,
   `pass_receivers_per_s`): what a webhook's redeliveries (E31_WEBHOOK_REDELIVERIES_PER_MINUTE) are
   measured against.
4. One team's `--silent-webhooks` webhooks and `--redeliveries` redeliveries to a receiver that accepts and
   never answers, two passes running as two workers would, and another team's delivery to the same host and
   port written while they are busy: from its commit to its arrival (`good_team_wait_s`), beside the same
   delivery with nothing else due and a pass started at its commit, as its kick starts one
   (`anchor_quiet_wait_s`, median of `--repeats`).

Prints the headline figures last, each beside its anchor and the ratio.
Run from the repository's root: .venv/bin/python bench/webhooks.py [--webhooks 1 20 50 100] [--due 20 500 5000]
"""

import argparse
import json
import logging
import math
import os
import statistics
import threading
import time
from datetime import timedelta

from _setup import BROKER_DB, Timer, machine, throwaway_database

PAYLOAD = {"id": "0b5e3c1e-0000-4000-8000-000000000000", "name": "nightly", "outcome": "failed", "exit_code": 3}
CLAIMS = 40  # claims timed for each median (fewer when fewer are due: each claim holds its receiver)


def webhooks_of(team, urls):
    from django.utils import timezone

    from webhooks.models import Webhook

    made = []
    for url in urls:
        made.append(Webhook(team=team, url=url, events=["job.released"], secret="s" * 43, created_at=timezone.now()))
    return Webhook.objects.bulk_create(made)


def empty() -> None:
    from webhooks.models import Delivery, ReceiverLease, Webhook

    Delivery.objects.all().delete()
    Webhook.objects.all().delete()
    ReceiverLease.objects.all().delete()


def ports(count: int) -> list[str]:
    """URLs of `count` receivers that are never sent to (parts 1 and 2): each webhook a receiver of its own."""
    return [f"http://127.0.0.1:{19000 + i}/hook" for i in range(count)]


def stop(receivers) -> None:
    """Stop the receivers at once: each takes a poll of its server's loop to stop."""
    stopping = [threading.Thread(target=receiver.stop) for receiver in receivers]
    for thread in stopping:
        thread.start()
    for thread in stopping:
        thread.join()


# Part 1 ------------------------------------------------------------------------------------------


def enqueue_times(team, count: int, repeats: int) -> tuple[float, float]:
    """Median ms of a release's deliveries to `count` webhooks, and of a plain bulk_create of as many rows."""
    from django.db import transaction
    from django.utils import timezone

    from webhooks.delivery import enqueue
    from webhooks.models import Delivery, Webhook

    empty()
    webhooks_of(team, ports(count))
    hooks = list(Webhook.objects.filter(team=team))
    ours, anchor = [], []
    for run in range(repeats + 1):  # the first warms up: the broker's connection, the statements' plans
        now = timezone.now()
        rows = [Delivery(webhook=h, event="job.released", payload=PAYLOAD, created_at=now, next_attempt_at=now)
                for h in hooks]  # fmt: skip
        with Timer() as plain, transaction.atomic():
            Delivery.objects.bulk_create(rows)
        with Timer() as timer, transaction.atomic():
            made = enqueue(team.pk, "job.released", PAYLOAD, now=timezone.now())
        assert len(made) == count, len(made)
        if run:
            anchor.append(plain.seconds * 1000)
            ours.append(timer.seconds * 1000)
    return statistics.median(ours), statistics.median(anchor)


# Part 2 ------------------------------------------------------------------------------------------


def due_deliveries(count: int, label: str) -> None:
    """`count` deliveries due, one per webhook, over as many teams as E31_TEAM_MAX_WEBHOOKS takes."""
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from teams.people import create_team
    from webhooks.models import Delivery

    empty()
    at = timezone.now() - timedelta(seconds=1)
    urls = ports(count)
    per_team = settings.E31_TEAM_MAX_WEBHOOKS
    for i in range(math.ceil(count / per_team)):
        team, _ = create_team(f"bench-{label}-{i}")
        made = webhooks_of(team, urls[i * per_team : (i + 1) * per_team])
        Delivery.objects.bulk_create(
            Delivery(webhook=w, event="job.released", payload=PAYLOAD, created_at=at, next_attempt_at=at) for w in made
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE webhooks_webhook, webhooks_delivery, webhooks_receiverlease")


def oldest_due_claim(now):
    """A plain outbox's claim: the oldest due delivery, locked and leased; no fairness, no receiver's lease."""
    from django.db import transaction

    from webhooks.delivery import LEASE
    from webhooks.models import Delivery

    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at")
            .first()
        )
        assert delivery is not None
        delivery.attempts += 1
        delivery.next_attempt_at = now + LEASE
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    return delivery


def claim_times(count: int) -> tuple[float, float]:
    """Median ms of a pass's next claim with `count` deliveries due, and of a plain outbox's claim."""
    from django.utils import timezone

    from webhooks.delivery import Attempt, _claim, _record
    from webhooks.models import Delivery

    due_deliveries(count, f"due-{count}")
    claims = min(CLAIMS, count)
    anchor, leased = [], []
    for _ in range(claims):
        with Timer() as timer:
            leased.append(oldest_due_claim(timezone.now()))
        anchor.append(timer.seconds * 1000)
    # Due again, as they were: our claims then find the same rows.
    Delivery.objects.filter(pk__in=[d.pk for d in leased]).update(attempts=0, next_attempt_at=leased[0].created_at)
    ours, taken = [], []
    for _ in range(claims):
        with Timer() as timer:
            claim = _claim(timezone.now())
        ours.append(timer.seconds * 1000)
        assert claim is not None
        taken.append(claim)
    for claim in taken:
        _record(claim, Attempt("2xx", 200, 1), now=timezone.now())
    return statistics.median(ours), statistics.median(anchor)


# Part 3 ------------------------------------------------------------------------------------------


def pass_per_s(team, receivers: int, per_receiver: int) -> float:
    """Deliveries a second of passes sending `per_receiver` deliveries to each of `receivers` fast receivers."""
    from django.utils import timezone

    from tests.webhooks.http_receiver import Receiver
    from webhooks.delivery import deliver_due
    from webhooks.models import Delivery

    empty()
    started = [Receiver().start() for _ in range(receivers)]
    try:
        at = timezone.now()
        made = webhooks_of(team, [r.url for r in started])
        # A warm-up, untimed: a process's first attempt makes its TLS context (webhooks.delivery._tls).
        Delivery.objects.create(
            webhook=made[0], event="job.released", payload=PAYLOAD, created_at=at, next_attempt_at=at
        )
        assert deliver_due() == 1
        Delivery.objects.all().delete()
        Delivery.objects.bulk_create(
            [
                Delivery(webhook=w, event="job.released", payload=PAYLOAD, created_at=at, next_attempt_at=at)
                for w in made
                for _ in range(per_receiver)
            ]
        )
        total = receivers * per_receiver
        sent = 0
        with Timer() as timer:
            while sent < total:
                sent += deliver_due(seconds=300)
        delivered = Delivery.objects.filter(status="delivered").count()
        assert delivered == total, f"{delivered} of {total} delivered"
        return sent / timer.seconds
    finally:
        stop(started)


def plain_posts_per_s(count: int) -> float:
    """POSTs a second of a plain httpx client sending a delivery's data to a fast receiver, one at a time."""
    import httpx

    from tests.webhooks.http_receiver import Receiver

    body = json.dumps({"event": "job.released", "data": PAYLOAD}, separators=(",", ":")).encode()
    receiver = Receiver().start()
    try:
        with httpx.Client(trust_env=False) as client:
            headers = {"Content-Type": "application/json"}
            client.post(receiver.url, content=body, headers=headers)  # a warm-up, untimed, as the pass's
            with Timer() as timer:
                for _ in range(count):
                    answer = client.post(receiver.url, content=body, headers=headers)
                    assert answer.status_code == 200, answer.status_code
        assert len(receiver.received) == count + 1
        return count / timer.seconds
    finally:
        receiver.stop()


# Part 4 ------------------------------------------------------------------------------------------


def arrival(receiver, path: str, seen: int, began: float) -> float:
    """Seconds from `began` until the receiver has more than `seen` requests to `path`."""
    while len(receiver.on(path)) <= seen:
        if time.monotonic() - began > 60:
            raise SystemExit(f"the delivery to {path} did not arrive within 60 s")
        time.sleep(0.001)
    return time.monotonic() - began


def in_threads(count: int, seconds: float) -> list[threading.Thread]:
    """`count` passes, each in a thread with its own database connection, as `count` workers would run them."""
    from django.db import connection

    from webhooks.delivery import deliver_due

    def one_pass() -> None:
        try:
            deliver_due(seconds=seconds)
        finally:
            connection.close()

    passes = [threading.Thread(target=one_pass) for _ in range(count)]
    for thread in passes:
        thread.start()
    return passes


def quiet_wait_s(good, repeats: int) -> float:
    """Median seconds from the commit of the good team's delivery to its arrival, nothing else due, a pass
    started at the commit by a thread that keeps its database connection, as a worker does."""
    import queue

    from django.db import connection
    from django.utils import timezone

    from tests.webhooks.http_receiver import Receiver
    from webhooks.delivery import deliver_due, enqueue

    kicks: queue.Queue[bool] = queue.Queue()
    passes: queue.Queue[int] = queue.Queue()

    def worker() -> None:
        try:
            while kicks.get():
                passes.put(deliver_due(seconds=60))
        finally:
            connection.close()

    empty()
    receiver = Receiver().start()
    thread = threading.Thread(target=worker)
    thread.start()
    try:
        webhooks_of(good, [receiver.url_at("/good")])
        kicks.put(True)  # a pass with nothing due: its connection made before any is timed
        assert passes.get(timeout=60) == 0
        waits = []
        for seen in range(repeats):
            enqueue(good.pk, "job.released", PAYLOAD, now=timezone.now())  # committed: autocommit
            began = time.monotonic()
            kicks.put(True)
            waits.append(arrival(receiver, "/good", seen, began))
            assert passes.get(timeout=60) == 1  # ended: the next delivery is the next kick's
        return statistics.median(waits)
    finally:
        kicks.put(False)
        thread.join()
        receiver.stop()


def good_team_wait_s(bad, good, silent: int, redeliveries: int) -> tuple[float, int]:
    """Seconds from the commit of the good team's delivery to its arrival while the bad team's deliveries to
    the same receiver go unanswered; and the most requests the receiver held unanswered at once."""
    from django.utils import timezone

    from tests.webhooks.http_receiver import Receiver
    from webhooks.delivery import TIMEOUT_S, enqueue, redeliver

    empty()
    receiver = Receiver(silent_paths=("/silent",)).start()
    try:
        webhooks_of(bad, [receiver.url_at(f"/silent/{i}") for i in range(silent)])
        first = enqueue(bad.pk, "job.released", PAYLOAD, now=timezone.now())[0]
        for _ in range(redeliveries):
            redeliver(first, now=timezone.now())
        webhooks_of(good, [receiver.url_at("/good")])
        passes = in_threads(2, 2 * TIMEOUT_S)
        while receiver.open_now == 0:
            time.sleep(0.01)
        enqueue(good.pk, "job.released", PAYLOAD, now=timezone.now())  # committed: autocommit
        waited = arrival(receiver, "/good", 0, time.monotonic())
        for thread in passes:
            thread.join()
        return waited, receiver.most_open
    finally:
        receiver.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--webhooks",
        type=int,
        nargs="+",
        default=[1, 20, 50, 100],
        help="a release's webhooks, each count timed; the headline at the largest",
    )
    parser.add_argument(
        "--due",
        type=int,
        nargs="+",
        default=[20, 500, 5000],
        help="deliveries due at once, each count timed; the headline at the largest",
    )
    parser.add_argument("--deliveries", type=int, default=200, help="deliveries of each pass of part 3")
    parser.add_argument("--receivers", type=int, default=8, help="receivers the second pass of part 3 sends to")
    parser.add_argument("--silent-webhooks", type=int, default=20, help="the bad team's webhooks in part 4")
    parser.add_argument("--redeliveries", type=int, default=40, help="the bad team's redeliveries in part 4")
    parser.add_argument("--repeats", type=int, default=10, help="runs of each median of parts 1 and 4")
    args = parser.parse_args()
    # Before Django reads its settings: the kicks of enqueue, and the redeliveries' rate windows (the cache),
    # go to the benches' Redis database, emptied first (a window left by an earlier run names these ids).
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{BROKER_DB}"
    os.environ["E31_WEBHOOK_ALLOWED_HOSTS"] = "127.0.0.1:19000-29999"
    from tests.workers import purge_broker

    purge_broker(os.environ["CELERY_BROKER_URL"])
    throwaway_database("e31_bench_webhooks")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request, in the pass and the anchor alike
    from django.conf import settings

    from teams.people import create_team

    bad, _ = create_team("bench-bad")
    good, _ = create_team("bench-good")
    took: list[float] = []  # each part's seconds, set-up included
    with Timer() as part:
        enqueues = {count: enqueue_times(bad, count, args.repeats) for count in sorted(args.webhooks)}
    took.append(part.seconds)
    with Timer() as part:
        claims = {count: claim_times(count) for count in sorted(args.due)}
    took.append(part.seconds)
    one = args.deliveries
    per_receiver = math.ceil(args.deliveries / args.receivers)
    with Timer() as part:
        anchor_posts = plain_posts_per_s(one)
        pass_one = pass_per_s(bad, 1, one)
        pass_many = pass_per_s(bad, args.receivers, per_receiver)
    took.append(part.seconds)
    with Timer() as part:
        quiet = quiet_wait_s(good, args.repeats)
        busy, most_open = good_team_wait_s(bad, good, args.silent_webhooks, args.redeliveries)
    took.append(part.seconds)
    empty()
    purge_broker(os.environ["CELERY_BROKER_URL"])

    print(machine())
    print("seconds of each part: " + ", ".join(f"{seconds:.1f}" for seconds in took))
    print(f"part 1: a release's deliveries, median of {args.repeats} (ms: enqueue, plain bulk_create, ratio):")
    for count, (ours, anchor) in enqueues.items():
        print(f"  {count} webhooks: {ours:.1f} {anchor:.1f} {ours / anchor:.2f}")
    (low, (low_ms, _)), (high, (high_ms, _)) = min(enqueues.items()), max(enqueues.items())
    if high > low:
        print(f"  each webhook more, from {low} to {high}: {(high_ms - low_ms) / (high - low):.2f} ms; "
              f"E31_TEAM_MAX_WEBHOOKS = {settings.E31_TEAM_MAX_WEBHOOKS}")  # fmt: skip
    print(f"part 2: a pass's next claim, median of up to {CLAIMS} (ms: ours, a plain outbox's, ratio):")
    for count, (ours, anchor) in claims.items():
        print(f"  {count} due: {ours:.1f} {anchor:.1f} {ours / anchor:.2f}")
    redeliveries_per_s = settings.E31_WEBHOOK_REDELIVERIES_PER_MINUTE / 60
    print(
        f"part 3: E31_WEBHOOK_REDELIVERIES_PER_MINUTE = {settings.E31_WEBHOOK_REDELIVERIES_PER_MINUTE}: "
        f"{redeliveries_per_s:.1f} a second, {redeliveries_per_s / pass_one:.2f} of what a pass sends one "
        f"receiver; E31_WEBHOOK_IN_FLIGHT = {settings.E31_WEBHOOK_IN_FLIGHT}"
    )
    print(f"part 4: at most {most_open} of the bad team's requests unanswered at once")
    enqueue_ms, anchor_enqueue_ms = enqueues[high]
    high_due = max(claims)
    claim_ms, anchor_claim_ms = claims[high_due]
    print(f"anchor_bulk_create_ms: {anchor_enqueue_ms:.1f} ms ({high} rows)")
    print(f"enqueue_ms: {enqueue_ms:.1f} ms ({high} webhooks)")
    print(f"enqueue_vs_anchor_ratio: {enqueue_ms / anchor_enqueue_ms:.2f}")
    print(f"anchor_oldest_due_claim_ms: {anchor_claim_ms:.1f} ms ({high_due} due)")
    print(f"claim_ms: {claim_ms:.1f} ms ({high_due} due)")
    print(f"claim_vs_anchor_ratio: {claim_ms / anchor_claim_ms:.2f}")
    print(f"anchor_posts_per_s: {anchor_posts:.1f} POSTs/s ({one}, one at a time)")
    print(f"pass_one_receiver_per_s: {pass_one:.1f} deliveries/s ({one})")
    print(f"pass_one_receiver_vs_anchor_ratio: {pass_one / anchor_posts:.2f}")
    print(f"pass_receivers_per_s: {pass_many:.1f} deliveries/s ({per_receiver * args.receivers} to {args.receivers})")
    print(f"pass_receivers_vs_anchor_ratio: {pass_many / anchor_posts:.2f}")
    print(f"anchor_quiet_wait_s: {quiet:.3f} s")
    print(f"good_team_wait_s: {busy:.3f} s ({args.silent_webhooks} silent webhooks, {args.redeliveries} redeliveries)")
    print(f"good_team_wait_vs_quiet_ratio: {busy / quiet:.1f}")


if __name__ == "__main__":
    main()

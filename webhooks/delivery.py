"""Deliveries: written with the event (`enqueue`), sent by a pass (`deliver_due`, task `webhooks.deliver`) by
fair turns, one attempt per receiver (docs/reference/notifications.md, "Webhooks"); the database is read and
written on the pass's own thread only, the attempts run in its pool."""

import contextlib
import functools
import json
import logging
import math
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery, Window
from django.db.models.functions import Now, RowNumber
from django.utils import timezone

from core import ratelimit
from jobs.scheduling import dispatch
from webhooks import hosts
from webhooks.models import Delivery, ReceiverLease, Webhook
from webhooks.signing import signature

log = logging.getLogger(__name__)

TASK = "webhooks.deliver"
TIMEOUT_S = 5.0  # an attempt's deadline, all its steps together
MAX_REDIRECTS = 3
FIRST_RETRY_S = 30  # then twice as long after each failed attempt
WEBHOOK_BACKOFF_MAX = timedelta(hours=1)
GIVE_UP_AFTER = timedelta(days=1)
# A delivery's lease: longer than an attempt can take.
LEASE = timedelta(minutes=5)
# A receiver's, should its pass die mid-attempt: on the database's clock, it outlasts the request's deadline.
RECEIVER_LEASE = timedelta(seconds=3 * TIMEOUT_S)
PASS_LIMIT = 500  # attempts per pass; the next kick or beat's pass takes the rest
PASS_SECONDS = 50.0  # then a pass claims no more, and ends once its attempts have (each within TIMEOUT_S)
POLL_S = 0.5  # how often a pass with attempts under way and a free slot looks again for a due delivery
CANDIDATES = 100  # webhooks read per claim, the fairest first
REDIRECTS = (301, 302, 303, 307, 308)
Answer = Delivery.Answer


class TooManyRedeliveries(Exception):
    def __init__(self, limit: int, wait_s: float) -> None:
        self.wait_s = math.ceil(wait_s)
        times = "once" if limit == 1 else f"{limit} times"
        super().__init__(
            f"A webhook's deliveries may be sent again at most {times} a minute "
            f"(E31_WEBHOOK_REDELIVERIES_PER_MINUTE): try again in {self.wait_s} s."
        )


def enqueue(
    team_id: int, event: str, payload: dict[str, Any] | Callable[[], dict[str, Any]], *, now: datetime
) -> list[Delivery]:
    """A payload given as a function is built only when some webhook asked for the event."""
    if not hosts.webhooks_are_on():
        return []
    # Read by team and matched here: a JSON `contains` lookup is PostgreSQL's, not SQLite's (make run).
    hooks = [h for h in Webhook.objects.filter(team_id=team_id, active=True) if event in h.events]
    if not hooks:
        return []
    data = payload() if callable(payload) else payload
    made = Delivery.objects.bulk_create(
        Delivery(webhook=hook, event=event, payload=data, created_at=now, next_attempt_at=now) for hook in hooks
    )
    dispatch.send_after_commit(TASK)
    return made


def redeliver(delivery: Delivery, *, now: datetime) -> Delivery:
    """A new delivery of the same event and data: a new id, so a receiver that saw the first one acts again."""
    window = ratelimit.Window(settings.E31_WEBHOOK_REDELIVERIES_PER_MINUTE, 60)
    if wait_s := ratelimit.take(f"webhooks:redeliver:{delivery.webhook_id}", window):
        raise TooManyRedeliveries(window.limit, wait_s)
    again = Delivery.objects.create(
        webhook=delivery.webhook,
        event=delivery.event,
        payload=delivery.payload,
        created_at=now,
        next_attempt_at=now,
        redelivery_of=delivery,
    )
    dispatch.send_after_commit(TASK)
    return again


@dataclass(frozen=True)
class Outgoing:
    """What an attempt sends: plain values, so the thread that sends it never reads the database."""

    delivery_id: uuid.UUID
    event: str
    payload: Any
    url: str
    secret: str


@dataclass(frozen=True)
class Attempt:
    answer: str  # a Delivery.Answer
    code: int | None  # the status code of the HTTP answer that ended it; None: no answer
    took_ms: int


@dataclass(frozen=True)
class Aimed:
    target: hosts.Target
    took_s: float


@dataclass(frozen=True)
class Claim:
    delivery: Delivery
    claimed_at: datetime
    # Put back should its receiver be held: the delivery's next_attempt_at, its webhook's last_attempt_at.
    due_at: datetime
    served_at: datetime | None
    # The receiver its webhook reached last ("": none yet) until the attempt is aimed, then the one it leased.
    receiver: str
    holder: uuid.UUID | None = None  # of the receiver's lease, once taken

    @property
    def outgoing(self) -> Outgoing:
        d = self.delivery
        return Outgoing(d.delivery_id, d.event, d.payload, d.webhook.url, d.webhook.secret)


def deliver_due(*, limit: int = PASS_LIMIT, seconds: float = PASS_SECONDS) -> int:
    """How many were tried. A pass stopped by its limits (`limit` claimed, `seconds` passed) queues the next."""
    if not hosts.webhooks_are_on():
        return 0
    give_up_stale(timezone.now())
    slots = settings.E31_WEBHOOK_IN_FLIGHT
    ends = time.monotonic() + seconds
    claimed = tried = 0
    in_flight: dict[Future[Aimed | Attempt], Claim] = {}  # aimed (no lease yet) or sent (its result)
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="webhook") as pool:
        while True:
            if len(in_flight) < slots and claimed < limit and time.monotonic() < ends:
                count = min(slots - len(in_flight), limit - claimed)
                for claim in _claims(timezone.now(), count, in_flight=in_flight.values()):
                    in_flight[pool.submit(aim, claim.outgoing)] = claim
                    claimed += 1
            if not in_flight:
                # A delivery waiting for a receiver another pass holds is that pass's to send.
                break
            done, _ = wait(in_flight, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                claim, result = in_flight.pop(future), future.result()
                if isinstance(result, Attempt):  # sent, or refused by its check
                    _record(claim, result, now=timezone.now())
                    tried += 1
                elif (leased := _lease(claim, result.target.receiver)) is not None:
                    # At once, so the request starts within the lease just taken.
                    in_flight[pool.submit(send, claim.outgoing, result)] = leased
    if claimed >= limit or time.monotonic() >= ends:
        dispatch.send_after_commit(TASK)
    return tried


def _ready(now: datetime, prefix: str = "") -> Q:
    return Q(**{f"{prefix}active": True}) & (
        Q(**{f"{prefix}retry_at__isnull": True}) | Q(**{f"{prefix}retry_at__lte": now})
    )


def _claim(now: datetime) -> Claim | None:
    """A pass's steps for one delivery on this thread (the tests and the bench drive passes with it), ready to
    `send`; None: nothing due, its receiver was held, or its check refused it."""
    for claim in _claims(now, 1):
        aimed = aim(claim.outgoing)
        if isinstance(aimed, Attempt):
            _record(claim, aimed, now=now)
            return None
        return _lease(claim, aimed.target.receiver)
    return None


def _claims(now: datetime, count: int, *, in_flight: Collection[Claim] = ()) -> list[Claim]:
    """None for a webhook whose last receiver is held, or with an attempt or its receiver `in_flight` (this
    pass's: a second delivery to a receiver not known yet would only find it leased). The webhooks are read in
    turns: each team's first (the teams served longest ago first), then each team's second, and so on."""
    held = ReceiverLease.objects.filter(until__gt=Now()).values("receiver")
    due = Delivery.objects.filter(webhook=OuterRef("pk"), status=Delivery.Status.PENDING, next_attempt_at__lte=now)
    team_served = (  # its latest, read from the index webhook_served
        Webhook.objects.filter(team_id=OuterRef("team_id"), last_attempt_at__isnull=False)
        .order_by("-last_attempt_at")
        .values("last_attempt_at")[:1]
    )
    served_first = (F("last_attempt_at").asc(nulls_first=True), "pk")
    candidates = (
        Webhook.objects.filter(_ready(now), Exists(due))
        .exclude(receiver__in=held)
        .annotate(
            turn=Window(RowNumber(), partition_by=[F("team_id")], order_by=served_first),
            team_served=Subquery(team_served),
        )
        .order_by("turn", F("team_served").asc(nulls_first=True), *served_first)
        .values_list("pk", "receiver")
    )
    claims: list[Claim] = []
    busy = {claim.receiver for claim in in_flight}
    sending = {claim.delivery.webhook_id for claim in in_flight}
    for webhook_id, receiver in candidates[:CANDIDATES]:
        # One attempt at a time to a receiver ("": not known before its first).
        if webhook_id in sending or receiver in busy:
            continue
        with transaction.atomic():
            if (claim := _take(webhook_id, receiver, now)) is None:  # another pass took it since
                continue
        if receiver:
            busy.add(receiver)
        claims.append(claim)
        if len(claims) == count:
            break
    return claims


def _lease(claim: Claim, receiver: str) -> Claim | None:
    """The claim with the receiver's lease taken (a dead pass's taken over), else None and the delivery given
    back. `until` is on the database's clock, so a worker whose clock runs ahead cannot take a live lease."""
    holder, until = uuid.uuid4(), Now() + RECEIVER_LEASE
    with transaction.atomic():  # on SQLite it begins by taking the write lock: Now() is read once it is had
        ReceiverLease.objects.bulk_create(
            [ReceiverLease(receiver=receiver, holder=holder, until=until)], ignore_conflicts=True
        )
        taken = ReceiverLease.objects.filter(receiver=receiver, holder=holder).exists() or bool(
            ReceiverLease.objects.filter(receiver=receiver, until__lte=Now()).update(holder=holder, until=until)
        )
    if taken:
        return replace(claim, receiver=receiver, holder=holder)
    _give_back(claim, receiver)
    return None


def _give_back(claim: Claim, receiver: str) -> None:
    """The claim undone, its webhook marked with the receiver held; its team keeps its turn."""
    delivery = claim.delivery
    with transaction.atomic():
        Delivery.objects.filter(pk=delivery.pk, attempts=delivery.attempts, status=Delivery.Status.PENDING).update(
            attempts=delivery.attempts - 1, next_attempt_at=claim.due_at
        )
        webhook = Webhook.objects.filter(pk=delivery.webhook_id)
        webhook.update(receiver=receiver)
        webhook.filter(last_attempt_at=claim.claimed_at).update(last_attempt_at=claim.served_at)


def _take(webhook_id: int, receiver: str, now: datetime) -> Claim | None:
    delivery = (
        Delivery.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(_ready(now, "webhook__"), webhook_id=webhook_id, status=Delivery.Status.PENDING)
        .filter(next_attempt_at__lte=now)
        .select_related("webhook")
        .order_by("next_attempt_at", "pk")
        .first()
    )
    if delivery is None or delivery.next_attempt_at is None:
        return None
    # Read under the row's lock: another pass's claim of the webhook may not have committed yet, and a give-back
    # of a time read before it would erase that attempt's turn. (NO KEY: new deliveries do not wait.)
    served_at = (
        Webhook.objects.select_for_update(no_key=True).values_list("last_attempt_at", flat=True).get(pk=webhook_id)
    )
    claim = Claim(delivery, now, delivery.next_attempt_at, served_at, receiver)
    delivery.attempts += 1
    delivery.next_attempt_at = now + LEASE
    delivery.save(update_fields=["attempts", "next_attempt_at"])
    Webhook.objects.filter(pk=webhook_id).update(last_attempt_at=now)
    return claim


def give_up_stale(now: datetime) -> int:
    """Pending for more than a day and not under way: failed, as the webhook's backoff may have kept them untried."""
    return Delivery.objects.filter(
        status=Delivery.Status.PENDING,
        webhook__active=True,
        created_at__lt=now - GIVE_UP_AFTER,
        next_attempt_at__lte=now,
    ).update(status=Delivery.Status.FAILED, next_attempt_at=None)


def next_attempt(delivery: Delivery, now: datetime) -> datetime | None:
    """After `delivery.attempts` failed attempts: 30 s, 60 s, 120 s…; None: a day has passed, it is given up."""
    at = now + timedelta(seconds=FIRST_RETRY_S * 2 ** (delivery.attempts - 1))
    return at if at <= delivery.created_at + GIVE_UP_AFTER else None


def webhook_backoff(failures: int) -> timedelta:
    return min(timedelta(seconds=FIRST_RETRY_S * 2 ** min(failures - 1, 20)), WEBHOOK_BACKOFF_MAX)


def _record(claim: Claim, result: Attempt, *, now: datetime) -> None:
    delivery = claim.delivery
    fields: dict[str, Any] = {
        "status_class": result.answer,
        "response_code": result.code,
        "duration_ms": result.took_ms,
    }
    ok = result.answer == Answer.OK
    if ok:
        fields |= {"status": Delivery.Status.DELIVERED, "delivered_at": now, "next_attempt_at": None}
    elif (at := next_attempt(delivery, now)) is not None:
        fields |= {"next_attempt_at": at}
    else:
        fields |= {"status": Delivery.Status.FAILED, "next_attempt_at": None}
    webhook = Webhook.objects.filter(pk=delivery.webhook_id)
    # The receiver it reached, for the claims to come (an attempt refused by its check reached none).
    reached = {"receiver": claim.receiver} if claim.holder is not None else {}
    with transaction.atomic():
        # Only the attempt this pass claimed: one whose lease ran out was claimed again by another pass.
        Delivery.objects.filter(pk=delivery.pk, attempts=delivery.attempts, status=Delivery.Status.PENDING).update(
            **fields
        )
        if ok:
            webhook.update(failures=0, retry_at=None, **reached)
        else:
            failures = delivery.webhook.failures + 1
            webhook.update(failures=F("failures") + 1, retry_at=now + webhook_backoff(failures), **reached)
        if claim.holder is not None:  # the receiver's lease ends with the attempt
            ReceiverLease.objects.filter(receiver=claim.receiver, holder=claim.holder).delete()
    for name, value in fields.items():
        setattr(delivery, name, value)


def aim(outgoing: Outgoing, *, seconds: float = TIMEOUT_S) -> Aimed | Attempt:
    began = time.monotonic()
    try:
        return Aimed(hosts.check(outgoing.url, timeout=seconds), time.monotonic() - began)
    except hosts.NotAllowed as exc:  # Unresolved too
        log.info("webhook delivery %s: %s", outgoing.delivery_id, exc)
        answer = Answer.NO_ANSWER if isinstance(exc, hosts.Unresolved) else Answer.NOT_ALLOWED
    except Exception:  # a URL's bad host is its delivery's failure, not the pass's
        log.warning("webhook delivery %s failed", outgoing.delivery_id, exc_info=True)
        answer = Answer.NO_ANSWER
    return Attempt(answer, None, round((time.monotonic() - began) * 1000))


def send(outgoing: Outgoing, aimed: Aimed, *, seconds: float = TIMEOUT_S) -> Attempt:
    began = time.monotonic()
    try:
        with _Deadline(seconds - aimed.took_s) as deadline:
            answer, code = _send(outgoing, aimed.target, deadline)
    except Exception:  # a receiver's bad answer is its delivery's failure, not the pass's
        log.warning("webhook delivery %s failed", outgoing.delivery_id, exc_info=True)
        answer, code = Answer.NO_ANSWER, None
    return Attempt(answer, code, round((aimed.took_s + time.monotonic() - began) * 1000))


def body_of(outgoing: Outgoing) -> bytes:
    """The body: the event and the delivery's id inside what is signed, so neither can be swapped."""
    envelope = {"event": outgoing.event, "delivery": str(outgoing.delivery_id), "data": outgoing.payload}
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()


def headers_of(outgoing: Outgoing, body: bytes, *, timestamp: int) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "E31-Webhooks",
        "X-E31-Event": outgoing.event,
        "X-E31-Delivery": str(outgoing.delivery_id),
        "X-E31-Timestamp": str(timestamp),
        "X-E31-Signature": signature(outgoing.secret, timestamp, body),
    }


def class_of(code: int) -> str:
    return {2: Answer.OK, 3: Answer.REDIRECT, 4: Answer.CLIENT_ERROR}.get(code // 100, Answer.SERVER_ERROR)


def _send(outgoing: Outgoing, first: hosts.Target, deadline: "_Deadline") -> tuple[str, int | None]:
    """Redirects followed by hand, each URL checked, and only to the receiver leased. The transport's words go
    to the log, never to the owner: they would say what listens at the address."""
    body = body_of(outgoing)
    headers = headers_of(outgoing, body, timestamp=int(time.time()))
    url, target = outgoing.url, first
    code: int | None = None
    # No connection kept alive: each request makes its own, the one the deadline can cut (see _post).
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(verify=_tls(), trust_env=False, follow_redirects=False, limits=limits) as client:
        for hop in range(MAX_REDIRECTS + 1):
            if hop:
                try:
                    target = hosts.check(url, timeout=deadline.left())
                except hosts.NotAllowed as exc:  # Unresolved too
                    log.info("webhook delivery %s: %s", outgoing.delivery_id, exc)
                    return (Answer.NO_ANSWER, None) if isinstance(exc, hosts.Unresolved) else (Answer.NOT_ALLOWED, code)
                if target.receiver != first.receiver:  # its lease is first's only
                    log.info(
                        "webhook delivery %s: a redirect to %s, not %s, the receiver leased: not followed",
                        outgoing.delivery_id, target.receiver, first.receiver,
                    )  # fmt: skip
                    return Answer.REDIRECT, code
            try:
                code, location = _post(client, target, headers, body, deadline)
            except httpx.HTTPError as exc:
                passed = " (past the deadline)" if deadline.passed.is_set() else ""
                log.info("webhook delivery %s: %s: %s%s", outgoing.delivery_id, type(exc).__name__, exc, passed)
                if deadline.status is not None:  # an answer httpx refused after its status line (a bad Location)
                    return class_of(deadline.status), deadline.status
                return Answer.NO_ANSWER, None
            if code not in REDIRECTS or not location:
                return class_of(code), code
            try:
                url = urljoin(url, location)
            except ValueError:  # a Location no URL parser takes
                return Answer.REDIRECT, code
    return Answer.REDIRECT, code  # more than MAX_REDIRECTS


@functools.cache
def _tls() -> ssl.SSLContext:
    """Made once: loading certifi's authorities takes longer than most deliveries, and holds the interpreter."""
    return httpx.create_ssl_context()


def _post(
    client: httpx.Client, target: hosts.Target, headers: dict[str, str], body: bytes, deadline: "_Deadline"
) -> tuple[int, str]:
    """POST to the checked address, the URL's own host kept for Host and, over TLS, for SNI and the certificate."""
    pinned = httpx.URL(target.url).copy_with(host=str(target.address))
    netloc = urlsplit(target.url).netloc
    extensions: dict[str, Any] = {"trace": deadline.trace}
    deadline.status = None
    if target.scheme == "https":
        extensions["sni_hostname"] = target.host
    request = client.build_request(
        "POST",
        pinned,
        content=body,
        headers={**headers, "Host": netloc},
        extensions=extensions,
        timeout=max(deadline.left(), 0.001),
    )
    response = client.send(request, stream=True)  # the answer's body is never read
    response.close()
    return response.status_code, response.headers.get("Location", "")


class _Deadline:
    """Cuts an attempt's connections `seconds` after it began: httpx's timeouts bound each socket operation, not
    the request (encode/httpx#1450). The sockets come from httpx's `trace`; a shutdown wakes the blocked read."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds
        self.sockets: list[socket.socket] = []
        self.passed = threading.Event()
        self.status: int | None = None  # the status line's code of the request under way, once it came
        self.timer = threading.Timer(seconds, self.cut)
        self.timer.daemon = True

    def left(self) -> float:
        return max(self.ends - time.monotonic(), 0.0)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        # The TCP connection, then (https) its TLS wrapping, which takes over the same descriptor.
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.sockets.append(info["return_value"].get_extra_info("socket"))
            if self.passed.is_set():  # made just as the time ran out
                self.cut()
        elif event == "http11.receive_response_headers.complete":
            self.status = int(info["return_value"][1])

    def cut(self) -> None:
        self.passed.set()
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):  # already closed, or detached by its TLS wrapping
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> "_Deadline":
        self.timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> None:
        self.timer.cancel()

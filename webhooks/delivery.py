"""Deliveries: written with the event (`enqueue`, inside its transaction), sent by a pass (`deliver_due`), from
the task `webhooks.deliver` that a commit kicks and beat runs every E31_NOTIFY_EVERY_S.

A pass claims one due delivery at a time (`SELECT … FOR UPDATE SKIP LOCKED`, then a lease: its
`next_attempt_at` moved ahead and the attempt counted, committed before any HTTP), so two passes never
send the same delivery at once and no transaction stays open across a request. A delivery whose
process died mid-request is due again when its lease ends.
"""

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from django.db import transaction
from django.utils import timezone

from jobs import dispatch
from webhooks import hosts
from webhooks.models import Delivery, Webhook
from webhooks.signing import signature

log = logging.getLogger(__name__)

TASK = "webhooks.deliver"
TIMEOUT_S = 5.0
MAX_REDIRECTS = 3
FIRST_RETRY_S = 30  # then twice as long after each failed attempt
GIVE_UP_AFTER = timedelta(days=1)
# Longer than an attempt can take: each of its requests (a first one and its redirects) has 5 s per step.
LEASE = timedelta(minutes=5)
PASS_LIMIT = 500  # deliveries per pass; the next kick or beat's pass takes the rest
# A pass holds a slot of a worker that also runs jobs: slow receivers must not keep it for long.
PASS_SECONDS = 50.0
REDIRECTS = (301, 302, 303, 307, 308)


def enqueue(
    team_id: int, event: str, payload: dict[str, Any] | Callable[[], dict[str, Any]], *, now: datetime
) -> list[Delivery]:
    """A pending delivery for each active webhook of the team that asked for `event`; sent once the
    transaction commits. Nothing while webhooks are off. A payload given as a function is built only
    when some webhook asked: a release without one costs a query, not the payload's."""
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
    """A new delivery of the same event and data (a new id: a receiver that saw the first one acts again)."""
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


def deliver_due(*, limit: int = PASS_LIMIT, seconds: float = PASS_SECONDS) -> int:
    """Send due deliveries, one claimed at a time, until none is due, `limit` were tried or `seconds` have
    passed. Returns how many were tried."""
    if not hosts.webhooks_are_on():
        return 0
    tried = 0
    ends = time.monotonic() + seconds
    while tried < limit and time.monotonic() < ends and (delivery := _claim(timezone.now())) is not None:
        try:
            code, error = _send(delivery)
        except Exception as exc:  # a receiver's bad answer (a Location no URL parser takes…) is its delivery's
            log.warning("webhook delivery %s failed", delivery.delivery_id, exc_info=True)
            code, error = None, f"{type(exc).__name__}: {exc}"[:500]
        _record(delivery, code, error, now=timezone.now())
        tried += 1
    return tried


def _claim(now: datetime) -> Delivery | None:
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now, webhook__active=True)
            .select_related("webhook")
            .order_by("next_attempt_at", "pk")
            .first()
        )
        if delivery is None:
            return None
        delivery.attempts += 1
        delivery.next_attempt_at = now + LEASE
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    return delivery


def body_of(delivery: Delivery) -> bytes:
    """The body: the event and the delivery's id inside what is signed, so neither can be swapped."""
    envelope = {"event": delivery.event, "delivery": str(delivery.delivery_id), "data": delivery.payload}
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()


def headers_of(delivery: Delivery, body: bytes, *, timestamp: int) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "E31-Webhooks",
        "X-E31-Event": delivery.event,
        "X-E31-Delivery": str(delivery.delivery_id),
        "X-E31-Timestamp": str(timestamp),
        "X-E31-Signature": signature(delivery.webhook.secret, timestamp, body),
    }


def _send(delivery: Delivery) -> tuple[int | None, str]:
    """POST the delivery; redirects followed by hand, each new URL checked as the first was.
    Returns the last status code (None: no answer) and what went wrong ("" for a 2xx)."""
    body = body_of(delivery)
    headers = headers_of(delivery, body, timestamp=int(time.time()))
    url = delivery.webhook.url
    code: int | None = None
    # No connection kept alive: each request makes its own, the one its deadline can cut (see _post).
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=TIMEOUT_S, trust_env=False, follow_redirects=False, limits=limits) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                target = hosts.check(url)
            except hosts.NotAllowed as exc:
                return None, str(exc)
            try:
                code, location = _post(client, target, headers, body)
            except httpx.TimeoutException:
                return None, f"no answer within {TIMEOUT_S:g} s"
            except httpx.HTTPError as exc:
                return None, f"{type(exc).__name__}: {exc}"[:500]
            if code in REDIRECTS and location:
                url = urljoin(url, location)
                continue
            return code, "" if 200 <= code < 300 else f"answered {code}"
    return code, f"more than {MAX_REDIRECTS} redirects"


def _post(client: httpx.Client, target: hosts.Target, headers: dict[str, str], body: bytes) -> tuple[int, str]:
    """POST to the checked address, the URL's own host kept for Host and, over TLS, for SNI and the
    certificate's check. The answer's status line and headers must come within TIMEOUT_S of the start."""
    pinned = httpx.URL(target.url).copy_with(host=str(target.address))
    netloc = urlsplit(target.url).netloc
    deadline = _Deadline()
    extensions: dict[str, Any] = {"trace": deadline.trace}
    if target.scheme == "https":
        extensions["sni_hostname"] = target.host
    request = client.build_request(
        "POST", pinned, content=body, headers={**headers, "Host": netloc}, extensions=extensions
    )
    with deadline:
        response = client.send(request, stream=True)  # the answer's body is never read
    response.close()
    return response.status_code, response.headers.get("Location", "")


class _Deadline:
    """Cuts a request's connection TIMEOUT_S after it began. httpx's timeouts bound each socket operation,
    not the request (encode/httpx#1450), so a receiver sending its answer a byte every few seconds would
    otherwise hold the pass, and a worker's slot, for hours. The connection's socket is taken from httpx's
    `trace` extension as it is made; a shutdown from the timer's thread wakes the blocked read."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.passed = threading.Event()
        self.timer = threading.Timer(TIMEOUT_S, self.cut)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        # The TCP connection, then (https) its TLS wrapping, which takes over the same descriptor.
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.sockets.append(info["return_value"].get_extra_info("socket"))
            if self.passed.is_set():  # made just as the time ran out
                self.cut()

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
        if isinstance(error, httpx.HTTPError) and self.passed.is_set():
            raise httpx.TimeoutException(f"no answer within {TIMEOUT_S:g} s") from error


def next_attempt(delivery: Delivery, now: datetime) -> datetime | None:
    """When to try again after `delivery.attempts` failed attempts (30 s, 60 s, 120 s…); None: a day has
    passed since the delivery was written, it is given up."""
    at = now + timedelta(seconds=FIRST_RETRY_S * 2 ** (delivery.attempts - 1))
    return at if at <= delivery.created_at + GIVE_UP_AFTER else None


def _record(delivery: Delivery, code: int | None, error: str, *, now: datetime) -> None:
    fields: dict[str, Any] = {"response_code": code, "last_error": error}
    if code is not None and 200 <= code < 300:
        fields |= {"status": Delivery.Status.DELIVERED, "delivered_at": now, "next_attempt_at": None}
    elif (at := next_attempt(delivery, now)) is not None:
        fields |= {"next_attempt_at": at}
    else:
        fields |= {"status": Delivery.Status.FAILED, "next_attempt_at": None}
    # Only the attempt this process claimed: one whose lease ran out was claimed again by another pass.
    Delivery.objects.filter(pk=delivery.pk, attempts=delivery.attempts, status=Delivery.Status.PENDING).update(**fields)
    for name, value in fields.items():
        setattr(delivery, name, value)

"""The outbox's pass (task notify.send): waiting mails claimed in batches under a lease and sent through
Django's mail, at least once (docs/reference/notifications.md, "Mail"). A pass that cannot reach the server
backs off its whole batch and stops; a pass ends after PASS_SECONDS, leaving the rest to the next."""

import logging
import smtplib
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.core.mail.backends.base import BaseEmailBackend
from django.db import transaction
from django.db.models import Q

from notify.compose import array_mail, footer, job_mail
from notify.links import unsubscribe_url
from notify.models import Mail
from notify.outbox import is_member
from notify.preferences import mail_is_on
from teams.models import Team

BATCH = 50  # mails one pass locks and sends over one connection at most
FIRST_DELAY = timedelta(minutes=1)  # after the first failure; doubled after each next one
LONGEST_DELAY = timedelta(hours=1)
GIVE_UP_AFTER = timedelta(days=1)  # from when the mail was written
LEASE = timedelta(minutes=5)  # a claimed row no other pass takes, unless this one died
PASS_SECONDS = 50.0  # the pass shares its worker slot with jobs: the rest waits for the next one

log = logging.getLogger(__name__)


@dataclass
class Sent:
    sent: int = 0
    failed: int = 0
    given_up: int = 0
    unreachable: bool = False  # the server could not be reached: the pass stops


def send_waiting(*, now: datetime, batch: int = BATCH) -> Sent:
    total = Sent()
    if not mail_is_on():
        return total
    started = time.monotonic()
    while time.monotonic() - started < PASS_SECONDS:
        mails = _claim(now=now, batch=batch)
        done = _send_claimed(mails, now=now)
        total.sent, total.failed, total.given_up = (
            total.sent + done.sent, total.failed + done.failed, total.given_up + done.given_up
        )  # fmt: skip
        if len(mails) < batch or done.unreachable:
            total.unreachable = done.unreachable
            break
    return total


def due(now: datetime) -> Q:
    return Q(sent_at__isnull=True, given_up=False) & (Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))


@transaction.atomic
def _claim(*, now: datetime, batch: int) -> list[Mail]:
    rows = Mail.objects.select_for_update(skip_locked=True, of=("self",)).filter(due(now))
    mails = list(rows.select_related("user", "job__team", "array__team").order_by("created_at", "pk")[:batch])
    Mail.objects.filter(pk__in=[m.pk for m in mails]).update(next_attempt_at=now + LEASE)
    for mail in mails:
        mail.next_attempt_at = now + LEASE
    return mails


def _send_claimed(mails: list[Mail], *, now: datetime) -> Sent:
    done = Sent()
    if not mails:
        return done
    connection = get_connection(fail_silently=False)
    try:
        connection.open()
    except Exception as exc:  # the server is down or refuses us: every mail of the batch waits its turn again
        for mail in mails:
            _failed(mail, exc, now=now)
            done.failed += 1
        done.unreachable = True
        return done
    try:
        for mail in mails:
            _send_one(mail, connection, now=now, done=done)
    finally:
        try:
            connection.close()
        except Exception:  # a server gone mid-batch: each mail's fate is written already
            log.warning("closing the SMTP connection failed", exc_info=True)
    return done


def _send_one(mail: Mail, connection: BaseEmailBackend, *, now: datetime, done: Sent) -> None:
    if not mail.user.email or not mail.user.is_active:
        _give_up(mail, "the person has no e-mail address now" if mail.user.is_active else "the account is off", now=now)
        done.given_up += 1
        return
    if (team := _team_of(mail)) is not None and not is_member(mail.user, team.pk):
        _give_up(mail, f"the person is no longer a member of the team {team.slug}", now=now)
        done.given_up += 1
        return
    if not mail.body:
        try:
            written = _written(mail)
        except Exception as exc:  # one mail that cannot be written must not stop the others, pass after pass
            log.exception("writing mail %s failed", mail.key)
            _failed(mail, exc, now=now)
            done.failed += 1
            return
        if written is None:
            _give_up(mail, "its job or array is gone", now=now)
            done.given_up += 1
            return
        mail.subject, mail.body = written
    try:
        message(mail, connection).send()
    except Exception as exc:  # SMTP, the network, or a header Django refuses: this mail's, not the pass's
        _failed(mail, exc, now=now)
        if mail.given_up:
            done.given_up += 1
        else:
            done.failed += 1
        return
    mail.sent_at, mail.last_error = now, ""
    mail.attempts += 1
    _write(mail, ["subject", "body", "sent_at", "last_error", "attempts"], now=now)
    done.sent += 1


def message(mail: Mail, connection: BaseEmailBackend | None = None) -> EmailMessage:
    url = unsubscribe_url(mail.user)
    return EmailMessage(
        subject=mail.subject,
        body=mail.body + "\n" + footer(url) + "\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[mail.user.email],
        headers={"List-Unsubscribe": f"<{url}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
        connection=connection,
    )


def _written(mail: Mail) -> tuple[str, str] | None:
    if mail.kind == Mail.Kind.JOB and mail.job is not None:
        return job_mail(mail.job)
    if mail.kind == Mail.Kind.ARRAY and mail.array is not None:
        return array_mail(mail.array)
    return None


def _team_of(mail: Mail) -> Team | None:
    """The team whose job or array the mail tells of (a digest or a budget warning was written for members)."""
    about = {Mail.Kind.JOB: mail.job, Mail.Kind.ARRAY: mail.array}.get(Mail.Kind(mail.kind))
    return None if about is None else about.team


def next_delay(attempts: int) -> timedelta:
    """1 min, 2, 4 … up to an hour."""
    return min(FIRST_DELAY * 2 ** max(attempts - 1, 0), LONGEST_DELAY)


def _failed(mail: Mail, exc: Exception, *, now: datetime) -> None:
    mail.attempts += 1
    mail.last_error = f"{type(exc).__name__}: {exc}"[:1000]
    mail.next_attempt_at = now + next_delay(mail.attempts)
    mail.given_up = permanent(exc) or mail.next_attempt_at > mail.created_at + GIVE_UP_AFTER
    log.warning("mail %s not sent (attempt %s): %s", mail.key, mail.attempts, mail.last_error)
    _write(mail, ["subject", "body", "attempts", "last_error", "next_attempt_at", "given_up"], now=now)


def permanent(exc: Exception) -> bool:
    """A 5xx reply (no such mailbox, refused): trying again would not help."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500


def _give_up(mail: Mail, why: str, *, now: datetime) -> None:
    mail.given_up, mail.last_error = True, why
    _write(mail, ["given_up", "last_error"], now=now)


def _write(mail: Mail, fields: list[str], *, now: datetime) -> None:
    """Written only while the row is still leased to this pass: one that outlived its lease lost the row."""
    Mail.objects.filter(pk=mail.pk, sent_at__isnull=True, next_attempt_at=now + LEASE).update(
        **{name: getattr(mail, name) for name in fields}
    )

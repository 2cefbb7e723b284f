"""The outbox's pass (task notify.send, nudged after a mail is written and run by beat): waiting mails sent
through Django's mail (the SMTP server of EMAIL_HOST), each once.

1. Rows due are locked with SKIP LOCKED, so a second pass (a nudge and beat at once) takes other rows or none.
2. A job's or an array's mail is written now, from the job as it is (its log sealed, its record written).
3. Each is sent with the unsubscribe link and its List-Unsubscribe headers (RFC 8058 one-click), and marked
   sent in the same transaction; an SMTP error puts it back with an exponential delay, for up to a day (a
   5xx refusal, no such mailbox, is given up at once).
The rows stay locked while the server answers: that is what keeps two passes from sending the same mail.
"""

import logging
import smtplib
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
from notify.preferences import mail_is_on

BATCH = 50  # mails one pass locks and sends over one connection at most
FIRST_DELAY = timedelta(minutes=1)  # after the first failure; doubled after each next one
LONGEST_DELAY = timedelta(hours=1)
GIVE_UP_AFTER = timedelta(days=1)  # from when the mail was written

log = logging.getLogger(__name__)


@dataclass
class Sent:
    sent: int = 0
    failed: int = 0
    given_up: int = 0


def send_waiting(*, now: datetime, batch: int = BATCH) -> Sent:
    """Send the mails due at `now`, batch after batch, until none is left that this pass may take."""
    total = Sent()
    if not mail_is_on():
        return total
    while True:
        done = _send_batch(now=now, batch=batch)
        total.sent, total.failed, total.given_up = (
            total.sent + done.sent, total.failed + done.failed, total.given_up + done.given_up
        )  # fmt: skip
        if done.sent + done.failed + done.given_up < batch:
            return total


def due(now: datetime) -> Q:
    return Q(sent_at__isnull=True, given_up=False) & (Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))


@transaction.atomic
def _send_batch(*, now: datetime, batch: int) -> Sent:
    done = Sent()
    rows = Mail.objects.select_for_update(skip_locked=True, of=("self",)).filter(due(now))
    mails = list(rows.select_related("user", "job__team", "array__team").order_by("created_at", "pk")[:batch])
    if not mails:
        return done
    connection = get_connection(fail_silently=False)
    try:
        connection.open()
    except (smtplib.SMTPException, OSError):
        pass  # each mail's send tries again and, failing, backs off on its own
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
        _give_up(mail, "the person has no e-mail address now" if mail.user.is_active else "the account is off")
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
            _give_up(mail, "its job or array is gone")
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
    mail.sent_at, mail.last_error, mail.next_attempt_at = now, "", None
    mail.attempts += 1
    mail.save(update_fields=["subject", "body", "sent_at", "last_error", "next_attempt_at", "attempts"])
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


def next_delay(attempts: int) -> timedelta:
    """The wait after the `attempts`-th failure: 1 min, 2, 4 … up to an hour."""
    return min(FIRST_DELAY * 2 ** max(attempts - 1, 0), LONGEST_DELAY)


def _failed(mail: Mail, exc: Exception, *, now: datetime) -> None:
    mail.attempts += 1
    mail.last_error = f"{type(exc).__name__}: {exc}"[:1000]
    mail.next_attempt_at = now + next_delay(mail.attempts)
    mail.given_up = permanent(exc) or mail.next_attempt_at > mail.created_at + GIVE_UP_AFTER
    log.warning("mail %s not sent (attempt %s): %s", mail.key, mail.attempts, mail.last_error)
    mail.save(update_fields=["subject", "body", "attempts", "last_error", "next_attempt_at", "given_up"])


def permanent(exc: Exception) -> bool:
    """The server said no for good (a 5xx reply: no such mailbox, refused), so trying again would not help."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500


def _give_up(mail: Mail, why: str) -> None:
    mail.given_up, mail.last_error = True, why
    mail.save(update_fields=["given_up", "last_error"])

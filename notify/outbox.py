"""Mails written to the outbox (notify.models.Mail) inside the transaction that made them due: a job's or an
array's end, a budget crossed. One row per mail by its unique key, so a release repeated or retried writes
nothing more; the sending is notify.sending's, nudged once the transaction commits."""

import logging
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from accounting.models import BudgetWarning
from jobs.lifecycle.array_state import array_outcome, counts
from jobs.models import Job, JobArray
from jobs.scheduling import dispatch
from notify.compose import budget_mail
from notify.models import Mail, Preference
from notify.preferences import mail_is_on, preference_of
from teams.access import teams_of

SEND_TASK = "notify.send"

log = logging.getLogger(__name__)


def job_ended(job: Job, *, now: datetime) -> Mail | None:
    """To its submitter, when they asked for its outcome; an array's task has none (its array is mailed whole)."""
    if job.array_id is not None or not mail_is_on():
        return None
    user = job.submitted_by
    if not _wants(user, job.outcome, team_id=job.team_id):
        return None
    key = f"job:{job.pk}:{job.attempt}:{user.pk}"
    return _write(Mail(key=key, kind=Mail.Kind.JOB, user=user, job=job, created_at=now))


def array_ended(array: JobArray, *, now: datetime) -> Mail | None:
    if not mail_is_on():
        return None
    user = array.submitted_by
    if not _wants(user, array_outcome(counts(array)), team_id=array.team_id):
        return None
    key = f"array:{array.pk}:{user.pk}"
    return _write(Mail(key=key, kind=Mail.Kind.ARRAY, user=user, array=array, created_at=now))


def budget_crossed(warning: BudgetWarning) -> list[Mail]:
    """To each member who takes the digest (the budget's news is the digest's), worded as it stands now."""
    if not mail_is_on():
        return []
    members = User.objects.filter(teams=warning.team_id, is_active=True).exclude(email="")
    off = set(Preference.objects.filter(user__in=members, digest=False).values_list("user_id", flat=True))
    month = f"{warning.month:%Y-%m}"
    subject, body = budget_mail(warning)
    mails = []
    for user in members.order_by("pk"):
        if user.pk in off:
            continue
        key = f"budget:{warning.team_id}:{month}:{warning.level}:{user.pk}"
        mail = Mail(key=key, kind=Mail.Kind.BUDGET, user=user, subject=subject, body=body, created_at=warning.at)
        if _write(mail, nudging=False) is not None:
            mails.append(mail)
    if mails:
        nudge()  # one pass sends them all
    return mails


def _wants(user: User, outcome: str, *, team_id: int) -> bool:
    return bool(user.email) and user.is_active and outcome in preference_of(user).email_on and is_member(user, team_id)


def is_member(user: User, team_id: int) -> bool:
    """A job's end (its log, its cost) is mailed only to a member, as only a member may open its page."""
    return teams_of(user).filter(pk=team_id).exists()


def _write(mail: Mail, *, nudging: bool = True) -> Mail | None:
    """None when its key was written before; in a savepoint, so a concurrent writer leaves the transaction whole."""
    try:
        with transaction.atomic():
            mail.save(force_insert=True)
    except IntegrityError:
        return None
    if nudging:
        nudge()
    return mail


def nudge() -> None:
    dispatch.send_after_commit(SEND_TASK)

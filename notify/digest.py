"""The morning digest: once a day at the hour a person chose, in their first team's zone, one mail of what
ended in their teams since the last, written once per person and day however many passes run
(docs/reference/notifications.md). A person with nothing to say gets no mail, but their day is marked too."""

import logging
import zoneinfo
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db import transaction
from django.db.models import Q

from notify import outbox
from notify.digest_report import TeamReport, body_of, report_of, subject_of
from notify.models import Mail, Preference
from notify.preferences import mail_is_on
from teams.models import Membership, Team

FIRST_WINDOW = timedelta(days=1)  # what a first digest covers
# A digest turned back on after weeks covers the last week, not every week it was off.
LONGEST_WINDOW = timedelta(days=7)
DEFAULT_HOUR = Preference._meta.get_field("digest_hour").get_default()
CLAIM_BATCH = 500  # people claimed and written per transaction
# A digest covers up to a minute before its pass: a release stamped earlier has committed by then.
SETTLE = timedelta(minutes=1)

log = logging.getLogger(__name__)


@dataclass
class Due:
    user_id: int
    zone: zoneinfo.ZoneInfo
    day: date  # today, in `zone`
    since: datetime
    has_row: bool
    team_ids: list[int] = field(default_factory=list)  # by slug


def mail_key(user_id: int, day: date) -> str:
    return f"digest:{user_id}:{day.isoformat()}"


def _zone(name: str, known: dict[str, zoneinfo.ZoneInfo]) -> zoneinfo.ZoneInfo:
    if name not in known:
        known[name] = Team(time_zone=name).zone
    return known[name]


def due_people(*, now: datetime) -> list[Due]:
    rows = (
        Membership.objects.filter(user__is_active=True)
        .exclude(user__email="")
        .filter(Q(user__mail_preference__isnull=True) | Q(user__mail_preference__digest=True))
        .order_by("user_id", "team__slug")
        .values_list(
            "user_id",
            "team_id",
            "team__time_zone",
            "user__mail_preference__pk",
            "user__mail_preference__digest_hour",
            "user__mail_preference__digested_until",
            "user__mail_preference__digest_day",
        )
    )
    zones: dict[str, zoneinfo.ZoneInfo] = {}
    found: list[Due] = []
    person: Due | None = None
    skipped = None  # a person seen and not due: their other teams' rows are passed over
    for user_id, team_id, zone_name, row, hour, until, day in rows:
        if person is not None and person.user_id == user_id:
            person.team_ids.append(team_id)
            continue
        if user_id == skipped:
            continue
        person = None
        zone = _zone(zone_name, zones)  # the first team by slug
        local = now.astimezone(zone)
        today = local.date()
        hour = DEFAULT_HOUR if hour is None else hour
        if local.time() < time(hour) or (day is not None and day >= today):
            skipped = user_id
            continue
        since = max(until, now - LONGEST_WINDOW) if until is not None else now - FIRST_WINDOW
        person = Due(user_id=user_id, zone=zone, day=today, since=since, has_row=row is not None, team_ids=[team_id])
        found.append(person)
    return found


def prepare(*, now: datetime) -> int:
    if not mail_is_on():
        return 0
    due = due_people(now=now)
    if not due:
        return 0
    # The rows the claim locks: no row is the defaults, which a pass may not lock.
    Preference.objects.bulk_create([Preference(user_id=d.user_id) for d in due if not d.has_row], ignore_conflicts=True)
    until = now - SETTLE
    words = _Words(Team.objects.in_bulk({team_id for d in due for team_id in d.team_ids}), now=now, until=until)
    written = 0
    for start in range(0, len(due), CLAIM_BATCH):
        batch = due[start : start + CLAIM_BATCH]
        said: dict[int, tuple[str, str] | None] = {}
        for person in batch:
            try:
                said[person.user_id] = words.of(person)
            except Exception:  # one person's digest that cannot be written waits for the next pass, no other
                log.exception("could not write the digest of person %s", person.user_id)
        ready = [d for d in batch if d.user_id in said]
        written += _claim_and_write(ready, said, now=now, until=until)
    return written


class _Words:
    """Reports read once per team and window, digests worded once per teams, window and zone: a pass costs its teams."""

    def __init__(self, teams: dict[int, Team], *, now: datetime, until: datetime) -> None:
        self.teams, self.now, self.until = teams, now, until
        self.reports: dict[tuple[int, datetime], TeamReport] = {}
        self.said: dict[tuple[tuple[int, ...], datetime, str], tuple[str, str] | None] = {}

    def of(self, person: Due) -> tuple[str, str] | None:
        key = (tuple(person.team_ids), person.since, person.zone.key)
        if key not in self.said:
            self.said[key] = self._worded(person)
        return self.said[key]

    def _worded(self, person: Due) -> tuple[str, str] | None:
        shown = [r for r in (self._report(team_id, person.since) for team_id in person.team_ids) if not r.quiet]
        if not shown:
            return None
        subject = subject_of(shown, since=person.since, now=self.now, zone=person.zone)
        return subject, body_of(shown, since=person.since, now=self.now, zone=person.zone)

    def _report(self, team_id: int, since: datetime) -> TeamReport:
        if (team_id, since) not in self.reports:
            self.reports[team_id, since] = report_of(self.teams[team_id], since=since, until=self.until, now=self.now)
        return self.reports[team_id, since]


@transaction.atomic
def _claim_and_write(
    batch: list[Due], words: dict[int, tuple[str, str] | None], *, now: datetime, until: datetime
) -> int:
    by_user = {d.user_id: d for d in batch}
    # Rows another pass holds are its to write; rows it wrote meanwhile are read with their new day.
    locked = (
        Preference.objects.select_for_update(skip_locked=True)
        .filter(user_id__in=by_user)
        .values_list("user_id", "digest", "digest_day")
    )
    claimed = [by_user[user_id] for user_id, on, day in locked if on and (day is None or day < by_user[user_id].day)]
    mails = []
    for d in claimed:
        said = words[d.user_id]
        if said is not None:
            subject, body = said
            key = mail_key(d.user_id, d.day)
            mails.append(
                Mail(key=key, kind=Mail.Kind.DIGEST, user_id=d.user_id, subject=subject, body=body, created_at=now)
            )
    # Under the lock no other pass writes these keys; a key found is a day already done (its row's day lost).
    done = set(Mail.objects.filter(key__in=[m.key for m in mails]).values_list("key", flat=True))
    mails = [m for m in mails if m.key not in done]
    Mail.objects.bulk_create(mails, ignore_conflicts=True)
    for day in {d.day for d in claimed}:
        users = [d.user_id for d in claimed if d.day == day]
        Preference.objects.filter(user_id__in=users).update(digest_day=day, digested_until=until)
    if mails:
        outbox.nudge()
    return len(mails)

"""What the morning digest says of one team over a window: what ended (failures first, arrays as counts,
pipelines with the step that broke), the schedule runs not submitted, the cost and the budget left; read in
a fixed number of aggregate queries with bounded lists, so a pass reads a team once however many of its
members are due, and then only words are made per person."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from decimal import Decimal
from urllib.parse import urlencode

from django.db.models import Count, Sum
from django.urls import reverse

from accounting.budgets import Standing
from accounting.models import Record
from accounting.rates import currency
from core import formats
from core.site import site_url
from dashboard import review
from dashboard.review import FAILURES, ArrayRow, Pipeline
from jobs.lifecycle.worst_case import standing
from jobs.models import Job, Outcome
from jobs.web.pipelines import Step, counts_shown
from schedules.models import RunStatus, ScheduleRun
from teams.models import Team

# Lists a mail keeps short: the rest is a count and the review page's link.
FAILURES_SHOWN = 20
NAMES_SHOWN = 10
GROUPS_SHOWN = 10
RUNS_SHOWN = 10
REASON_CHARS = 200
NOT_SUBMITTED = [RunStatus.MISSED, RunStatus.REFUSED]


@dataclass(frozen=True)
class Failure:
    id: uuid.UUID
    name: str
    outcome: str
    exit_code: int | None
    reason: str
    released_at: datetime


@dataclass(frozen=True)
class RunNotSubmitted:
    schedule: str
    planned_at: datetime
    status: str
    reason: str


@dataclass
class TeamReport:
    team: Team
    since: datetime
    until: datetime
    failures: list[Failure] = field(default_factory=list)
    by_outcome: dict[str, int] = field(default_factory=dict)  # jobs alone (not tasks, not in a pipeline)
    succeeded_names: list[tuple[str, int]] = field(default_factory=list)  # the most frequent first
    arrays: list[ArrayRow] = field(default_factory=list)  # failed first
    pipelines: list[Pipeline] = field(default_factory=list)  # broken first
    runs: list[RunNotSubmitted] = field(default_factory=list)
    runs_total: int = 0
    cost: Decimal = Decimal(0)
    budget: Standing | None = None

    @property
    def failed(self) -> int:
        return sum(self.by_outcome.get(outcome, 0) for outcome in FAILURES)

    @property
    def succeeded(self) -> int:
        return self.by_outcome.get(Outcome.SUCCEEDED, 0)

    @property
    def ended(self) -> int:
        return sum(self.by_outcome.values()) + len(self.arrays) + len(self.pipelines)

    @property
    def quiet(self) -> bool:
        return not self.ended and not self.runs_total

    @property
    def failed_items(self) -> int:
        return self.failed + sum(1 for p in self.pipelines if p.broken) + sum(1 for a in self.arrays if a.failed)

    @property
    def succeeded_items(self) -> int:
        whole = sum(1 for p in self.pipelines if p.broken is None and p.at is None and _all_succeeded(p))
        return self.succeeded + whole + sum(1 for a in self.arrays if a.outcome == Outcome.SUCCEEDED)


def _all_succeeded(pipeline: Pipeline) -> bool:
    return all(step.outcome == Outcome.SUCCEEDED for step in pipeline.steps)


def report_of(team: Team, *, since: datetime, until: datetime, now: datetime) -> TeamReport:
    jobs = Job.objects.filter(team=team)
    alone = review.alone(jobs, since=since, until=until).order_by()
    found = TeamReport(team=team, since=since, until=until)
    found.by_outcome = {row["outcome"]: row["n"] for row in alone.values("outcome").annotate(n=Count("pk"))}
    if found.failed:
        rows = alone.filter(outcome__in=FAILURES).order_by("-released_at", "pk")[:FAILURES_SHOWN]
        columns = ["id", "name", "outcome", "exit_code", "reason", "released_at"]
        found.failures = [Failure(**row) for row in rows.values(*columns)]
    if found.succeeded:
        names = alone.filter(outcome=Outcome.SUCCEEDED).values("name").annotate(n=Count("pk"))
        found.succeeded_names = [(row["name"], row["n"]) for row in names.order_by("-n", "name")[:NAMES_SHOWN]]
    found.pipelines, found.arrays, _ = review.pipelines_of(jobs, since=since, until=until, with_live=False)
    runs = ScheduleRun.objects.filter(
        schedule__team=team, status__in=NOT_SUBMITTED, recorded_at__gte=since, recorded_at__lt=until
    )
    found.runs_total = runs.count()
    if found.runs_total:
        shown = runs.order_by("planned_at", "pk").values_list("schedule__name", "planned_at", "status", "reason")
        found.runs = [RunNotSubmitted(*row) for row in shown[:RUNS_SHOWN]]
    if found.quiet:
        return found
    records = Record.objects.filter(team=team, released_at__gte=since, released_at__lt=until)
    found.cost = records.aggregate(total=Sum("cost"))["total"] or Decimal(0)
    found.budget = standing(team, now=now)
    return found


def subject_of(reports: list[TeamReport], *, since: datetime, now: datetime, zone: tzinfo) -> str:
    failed = sum(r.failed_items for r in reports)
    succeeded = sum(r.succeeded_items for r in reports)
    parts = [f"{failed:,} failed", f"{succeeded:,} succeeded"]
    runs = sum(r.runs_total for r in reports)
    if runs:
        parts.append(formats.count(runs, "schedule run") + " not submitted")
    return f"E31 digest: {', '.join(parts)} since {formats.moment(since, zone)}"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def _more(total: int, shown: int, what: str) -> list[str]:
    return [f"  … and {total - shown:,} more {what}"] if total > shown else []


def _ended_words(outcome: str, exit_code: int | None, reason: str) -> str:
    words = formats.outcome_label(outcome)
    if exit_code is not None:
        words += f", exit code {exit_code}"
    if reason:
        words += f": {_one_line(reason)}"
    return words


def _step_link(step: Step) -> str:
    if step.job is not None:
        return site_url(reverse("jobs:detail", args=[step.job.pk]))
    return site_url(reverse("jobs:array", args=[step.node.pk]))


def _counts_words(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {words}" for _, words, n in counts_shown(counts))


def _failure_lines(reports: list[TeamReport], label: "_Label", zone: tzinfo) -> list[str]:
    total = sum(r.failed for r in reports)
    if not total:
        return []
    lines = [f"FAILED ({total:,})"]
    for r in reports:
        for f in r.failures:
            lines.append(f"- {label(r)}{f.name} at {formats.moment(f.released_at, zone)}")
            lines.append(f"  {_ended_words(f.outcome, f.exit_code, f.reason)}")
            lines.append(f"  {site_url(reverse('jobs:detail', args=[f.id]))}")
        lines += _more(r.failed, len(r.failures), f"in {r.team.slug}")
    return [*lines, ""]


def _pipeline_lines(reports: list[TeamReport], label: "_Label") -> list[str]:
    if not any(r.pipelines for r in reports):
        return []
    lines = ["PIPELINES"]
    for r in reports:
        for p in r.pipelines[:GROUPS_SHOWN]:
            chain = " → ".join(step.node.name for step in p.steps)
            if p.broken is not None:
                b = p.broken
                exit_code = b.job.exit_code if b.job is not None else None
                reason = b.job.reason if b.job is not None else _counts_words(b.counts)
                lines.append(
                    f"- {label(r)}{chain}: broke at {b.node.name} ({_ended_words(b.outcome, exit_code, reason)})"
                )
                if p.cancelled_after:
                    lines.append("  cancelled after it: " + ", ".join(s.node.name for s in p.cancelled_after))
                lines.append(f"  {_step_link(b)}")
            elif p.at is not None:
                lines.append(f"- {label(r)}{chain}: at {p.at.node.name}, {p.at.state_words}")
            else:
                lines.append(f"- {label(r)}{chain}: every step ended, {p.steps[-1].state_words} last")
        lines += _more(len(r.pipelines), GROUPS_SHOWN, f"pipelines in {r.team.slug}")
    return [*lines, ""]


def _array_lines(reports: list[TeamReport], label: "_Label") -> list[str]:
    if not any(r.arrays for r in reports):
        return []
    lines = ["ARRAYS"]
    for r in reports:
        for a in r.arrays[:GROUPS_SHOWN]:
            size = sum(a.counts.values())
            lines.append(f"- {label(r)}{a.node.name} [{size:,} tasks]: {_counts_words(a.counts)}")
            if a.failed:
                lines.append(f"  {_step_link(a)}")
        lines += _more(len(r.arrays), GROUPS_SHOWN, f"arrays in {r.team.slug}")
    return [*lines, ""]


def _run_lines(reports: list[TeamReport], label: "_Label", zone: tzinfo) -> list[str]:
    total = sum(r.runs_total for r in reports)
    if not total:
        return []
    lines = [f"SCHEDULE RUNS NOT SUBMITTED ({total:,})"]
    for r in reports:
        for run in r.runs:
            when = formats.moment(run.planned_at, zone)
            lines.append(f"- {label(r)}{run.schedule} at {when}: {run.status}, {_one_line(run.reason)}")
        lines += _more(r.runs_total, len(r.runs), f"in {r.team.slug}")
    return [*lines, ""]


def _success_lines(reports: list[TeamReport], label: "_Label") -> list[str]:
    lines = []
    total = sum(r.succeeded for r in reports)
    if total:
        lines.append(f"SUCCEEDED ({total:,})")
        for r in reports:
            if r.succeeded:
                names = ", ".join(name if n == 1 else f"{name} ×{n:,}" for name, n in r.succeeded_names)
                shown = sum(n for _, n in r.succeeded_names)
                rest = f" and {r.succeeded - shown:,} more" if r.succeeded > shown else ""
                lines.append(f"- {label(r)}{names}{rest}")
        lines.append("")
    for outcome in Outcome.values:
        n = sum(r.by_outcome.get(outcome, 0) for r in reports)
        if n and outcome != Outcome.SUCCEEDED and outcome not in FAILURES:  # cancelled: someone's choice
            lines += [f"{formats.outcome_label(outcome).upper()} ({n:,})", ""]
    return lines


def _money_lines(reports: list[TeamReport], label: "_Label") -> list[str]:
    lines = ["COST AND BUDGET"]
    for r in reports:
        line = f"- {label(r)}{formats.money(r.cost, currency())} since the last digest"
        b = r.budget
        if b is not None:
            left = b.limit - b.used
            standing_words = f"{b.amount(left)} left" if left >= 0 else f"{b.amount(-left)} over"
            line += (
                f"; budget for {b.month:%B %Y}: {standing_words} of {b.amount_limit} "
                f"({b.amount_spent} spent, {b.amount_committed} committed to jobs not ended)"
            )
        lines.append(line)
    return [*lines, ""]


class _Label:
    def __init__(self, reports: list[TeamReport]) -> None:
        self.several = len(reports) > 1

    def __call__(self, report: TeamReport) -> str:
        return f"[{report.team.slug}] " if self.several else ""


def body_of(reports: list[TeamReport], *, since: datetime, now: datetime, zone: tzinfo) -> str:
    label = _Label(reports)
    teams = ", ".join(r.team.slug for r in reports)
    review_link = site_url(reverse("dashboard:review")) + "?" + urlencode({"since": since.astimezone(zone).isoformat()})
    lines = [
        f"What ended in {teams} since {formats.moment(since, zone)} ({zone}), as of {formats.moment(now, zone)}.",
        "",
        *_failure_lines(reports, label, zone),
        *_pipeline_lines(reports, label),
        *_array_lines(reports, label),
        *_run_lines(reports, label, zone),
        *_success_lines(reports, label),
        *_money_lines(reports, label),
        f"The review: {review_link}",
    ]
    return "\n".join(lines) + "\n"

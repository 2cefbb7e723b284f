"""The words of each mail, in plain text: a job's or an array's end (written at sending, from the job as it
is then), a budget crossed, and the footer every mail ends with (the unsubscribe link)."""

import re

from django.urls import reverse

from accounting.budgets import in_unit
from accounting.models import BudgetWarning
from accounting.rates import currency
from core import formats
from core.site import site_url
from jobs.lifecycle.array_state import FAILED, array_outcome, counts, tasks_of
from jobs.models import Job, JobArray
from jobs.storage import logs
from jobs.web.figures import figures

LOG_LINES = 20  # the end of a job's log a mail quotes
LOG_BYTES = 16 * 1024  # read for those lines: a log of very long lines is quoted shorter
FAILED_INDICES = 20  # an array's failed tasks named by index
# Terminal escapes and other control characters in a job's log would act in a mail reader that shows them.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def job_mail(job: Job) -> tuple[str, str]:
    found = figures(job)
    outcome = job.outcome or "ended"
    subject = f"{outcome}: {_one_line(job.name)} (job {str(job.pk)[:8]})"
    lines = [
        f"Job {job.name} of team {job.team.slug} ended: {formats.outcome_label(job.outcome) or outcome}.",
        "",
        f"Exit code:  {job.exit_code if job.exit_code is not None else 'none'}",
        f"Reason:     {_one_line(job.reason) or 'none given'}",
        f"Attempt:    {job.attempt}",
        f"Queued:     {formats.duration(found.queue_wait)}",
        f"Ran:        {formats.duration(found.run_time)}",
        f"CPU:        {_share(found.cpu_used, found.cpu_note)} of {formats.count(job.cpus, 'cpu')} held",
        f"Memory:     {_share(found.memory_used, found.memory_note)} of {job.memory_mb} MB held",
        f"Cost:       {formats.money(found.cost, currency()) if found.cost is not None else 'none (never held)'}",
    ]
    if found.advice:
        lines.append(found.advice)
    tail = log_tail(job)
    lines += ["", f"Last {LOG_LINES} lines of its log:" if tail else "Its log is empty."]
    lines += [f"  {line}" for line in tail]
    lines += ["", f"The job: {site_url(reverse('jobs:detail', args=[job.pk]))}"]
    return subject, "\n".join(lines)


def array_mail(array: JobArray) -> tuple[str, str]:
    found = counts(array)
    worst = array_outcome(found)
    subject = f"{worst}: {_one_line(array.name)} (array {str(array.pk)[:8]}, {formats.count(array.size, 'task')})"
    lines = [f"Array {array.name} of team {array.team.slug} ended: {formats.count(array.size, 'task')}.", ""]
    lines += [f"  {formats.outcome_label(o) or o}: {n}" for o, n in sorted(found.items(), key=lambda i: -i[1])]
    failed = list(
        tasks_of(array).filter(outcome__in=FAILED).values_list("array_index", flat=True)[: FAILED_INDICES + 1]
    )
    if failed:
        more = ", …" if len(failed) > FAILED_INDICES else ""
        lines += ["", "Failed tasks: " + ", ".join(str(i) for i in failed[:FAILED_INDICES]) + more]
    if array.stop_reason:
        lines += ["", f"Stopped: {_one_line(array.stop_reason)}"]
    lines += ["", f"The array: {site_url(reverse('jobs:array', args=[array.pk]))}"]
    return subject, "\n".join(lines)


def budget_mail(warning: BudgetWarning) -> tuple[str, str]:
    team = warning.team
    limit, spent = in_unit(warning.limit, warning.unit), in_unit(warning.spent, warning.unit)
    subject = f"budget: team {team.slug} at {warning.level}% of {limit} ({warning.month:%B})"
    words = "has reached its budget" if warning.level >= 100 else f"has spent {warning.level}% of its budget"
    body = "\n".join(
        [
            f"Team {team.slug} ({team.name}) {words} for {warning.month:%B %Y}: {spent} of {limit}.",
            "",
            "A job whose worst case would take the team past its budget is refused at submission; an operator "
            "can extend the month's budget.",
            "",
            f"The team's usage: {site_url(reverse('ops:usage'))}",
        ]
    )
    return subject, body


def footer(unsubscribe: str) -> str:
    choices = site_url(reverse("notify:notifications"))
    return f"\n-- \nYour mail from E31 Network: {choices}\nStop all of it: {unsubscribe}"


def log_tail(job: Job) -> list[str]:
    data, start, _ = logs.last_bytes(job.pk, LOG_BYTES)
    if start > 0 and b"\n" in data:  # begin at a line's start
        data = data[data.index(b"\n") + 1 :]
    lines = data.decode("utf-8", errors="replace").splitlines()[-LOG_LINES:]
    return [CONTROL.sub("?", line.expandtabs()) for line in lines]


def _share(used: float | None, note: str) -> str:
    return formats.percent(used) if used is not None else (note or "not measured")


def _one_line(text: str) -> str:
    return CONTROL.sub(" ", " ".join(text.split()))

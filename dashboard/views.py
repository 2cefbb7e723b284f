from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from core.filters import MomentRange
from core.pagination import page_or_404
from dashboard import review
from jobs.access import visible_jobs_by_team_ids
from jobs.web.runs import strips
from jobs.web.upstreams import read_names
from teams.access import SignedInRequest

REVIEW_PAGE_SIZE = 25  # ended jobs per page of the review (each is a card of figures)
WAITING_SHOWN = 20  # the review lists the head of the queue; the rest are a link to the filtered list
GROUPS_SHOWN = 25  # pipelines, and arrays, on the review's first page; the rest are counted
# A card's run history: the last ten runs tell a flaky name from a broken one, and fit a phone's line at 24 px a
# cell; the job page keeps the longer one (jobs.web.runs.STRIP_LENGTH).
REVIEW_STRIP_LENGTH = 10


@require_GET
@login_required
def review_page(request: SignedInRequest) -> HttpResponse:
    """The review since a time (18:00 yesterday by default) in the team's zone; a bad since or until is 400."""
    now = timezone.now()
    zone = timezone.get_current_timezone()  # the viewer's team's, as on every page (e31site.middleware)
    form = MomentRange(request.GET)
    if not form.is_valid():
        return render(request, "dashboard/review.html", {"form": form, "zone": zone}, status=400)
    since: datetime = form.cleaned_data["since"] or review.default_since(now, zone)
    until: datetime | None = form.cleaned_data["until"]
    jobs = visible_jobs_by_team_ids(request.user)
    ended = Paginator(review.ended(jobs, since=since, until=until), REVIEW_PAGE_SIZE)
    page = page_or_404(ended, request.GET.get("page"))
    shown = list(page.object_list)
    # Its arrays' rows serve the running and waiting parts too: one query for both.
    pipelines, arrays, rows = review.pipelines_of(jobs, since=since, until=until)
    first = page.number == 1
    rows_shown = review.rows_of(shown)
    pipelines_shown, arrays_shown = (pipelines[:GROUPS_SHOWN], arrays[:GROUPS_SHOWN]) if first else ([], [])
    context = {
        "form": form,
        "zone": zone,
        "since": since,
        "until": until,
        "page": page,
        "page_numbers": page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
        "summary": review.summary(jobs, since=since, until=until, now=now),
        "ended": rows_shown,
        "open_failures": review.open_failures(pipelines_shown, arrays_shown, rows_shown),
        # Every card's run history in one query, whatever the number of cards.
        "strips": strips({(job.team_id, job.name) for job in shown}, length=REVIEW_STRIP_LENGTH),
        "counts": review.outcome_counts(jobs, now=now),
        "windows": [label for label, _ in review.WINDOWS],
        "pipelines": pipelines_shown,
        "pipelines_total": len(pipelines),
        "pipelines_more": len(pipelines) - GROUPS_SHOWN if first else 0,
        "arrays": arrays_shown,
        "arrays_total": len(arrays),
        "arrays_more": len(arrays) - GROUPS_SHOWN if first else 0,
        **_now_context(jobs, now, [row for row in rows.values() if row.running or row.waiting]),
    }
    return render(request, "dashboard/review.html", context)


def _now_context(jobs: Any, now: datetime, live: list[review.ArrayRow] | None = None) -> dict[str, Any]:
    """What runs and waits: jobs one row each, an array one row with how many of its tasks run and wait."""
    waiting = review.waiting(jobs)
    head = list(waiting[: WAITING_SHOWN + 1])
    read_names(head[:WAITING_SHOWN], "wait_reason")  # for all at once: this part is polled every few seconds
    live = review.arrays_now(jobs) if live is None else sorted(live, key=lambda row: row.node.name)
    return {
        "now": now,
        "running": [(job, *review.progress(job, now)) for job in review.running(jobs)],
        "running_arrays": [row for row in live if row.running],
        "waiting": head[:WAITING_SHOWN],
        "waiting_arrays": [row for row in live if row.waiting],
        "waiting_more": len(head) > WAITING_SHOWN,
    }


@require_GET
@login_required
def review_now(request: SignedInRequest) -> HttpResponse:
    context = _now_context(visible_jobs_by_team_ids(request.user), timezone.now())
    return render(request, "dashboard/partials/review_now.html", context)

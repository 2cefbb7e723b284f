"""An array's page: its counts, the grid of its tasks (one string per group: a template loop over ten thousand
tasks would not draw fast), a page of their table, cancel, and resubmit the failed; polled while a task runs."""

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

import django_filters
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from core.pagination import page_or_404
from core.refusals import Refused
from jobs.lifecycle import array_state
from jobs.models import Job, JobArray, Outcome, Stage
from jobs.submit.again import NothingToResubmit, resubmit_array
from jobs.submit.arrays import cancel_array
from jobs.web import pipelines
from jobs.web.views import PageRequest
from teams.access import AnyUser

_NO_ID = str(uuid.UUID(int=0))
TASKS_PAGE_SIZE = 50
# The header the polled part sends back with the key of what it shows (shown_key): unchanged, the answer is 204.
SHOWN_HEADER = "X-E31-Shown"
# A changed poll sends the whole grid, a link a task: a bigger array polls less often (5 s up to 1,000 tasks).
POLL_S, POLL_TASKS_PER_S = 5, 200
# What a row of the task table shows: its failure excerpt is at most 2 KB (jobs.lifecycle.excerpts.MAX_BYTES).
TASK_COLUMNS = ["id", "name", "array_index", "stage", "outcome", "exit_code", "failure_excerpt", "started_at",
                "finished_at", "attempt"]  # fmt: skip


class TaskFilter(django_filters.FilterSet):
    """Where a task is (an outcome once released, else its stage), as the grid groups them."""

    outcome = django_filters.ChoiceFilter(
        choices=[(place, pipelines.WORDS[place]) for place in array_state.SHOWN_FIRST],
        method="at_place",
        label="Outcome",
        empty_label="any",
    )

    class Meta:
        model = Job
        fields: list[str] = []

    def at_place(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        return queryset.filter(array_state.at_place(value))


@dataclass
class Group:
    """Tasks in one place (a stage or an outcome), in index order, as the grid's cells."""

    key: str
    label: str
    size: int
    cells: SafeString


def array_for(user: AnyUser, array_id: uuid.UUID) -> JobArray:
    return array_state.array_in(array_state.visible_arrays(user).select_related("team", "submitted_by"), array_id)


def grid(array: JobArray) -> list[Group]:
    """Its tasks failures first, grouped by where they are; one query of four columns."""
    link = reverse("jobs:detail", kwargs={"job_id": _NO_ID})
    rows = array_state.failures_first(array).values_list("pk", "array_index", "stage", "outcome")
    groups: list[tuple[str, list[str]]] = []
    for pk, index, stage, outcome in rows:
        key = outcome if stage == Stage.RELEASE else stage
        if not groups or groups[-1][0] != key:
            groups.append((key, []))
        # Ids, indices and the words above need no escaping; the title is the cell's name for screen readers.
        groups[-1][1].append(
            f'<a href="{link.replace(_NO_ID, str(pk))}" title="task {index}: {pipelines.WORDS[key]}"></a>'
        )
    return [Group(key, pipelines.WORDS[key], len(cells), mark_safe("".join(cells))) for key, cells in groups]


def shown_key(array: JobArray, found: dict[str, int], attempts: int) -> str:
    """A key that changes whenever the polled part would; the sum of attempts, as a retry can leave the counts even."""
    parts = [sorted(found.items()), array.released_at, array.stopped_at, array.stop_reason, attempts]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _live_context(array: JobArray, found: dict[str, int], stage: str, key: str) -> dict[str, Any]:
    """What the polled part shows but its task table: the stage, counts and grid."""
    return {
        "array": array,
        "stage": stage,
        "shown_key": key,
        "poll_s": max(POLL_S, array.size // POLL_TASKS_PER_S),
        "ended": sum(n for place, n in found.items() if place in Outcome.values),
        "counts": pipelines.counts_shown(found),
        "failed": sum(found.get(outcome, 0) for outcome in array_state.FAILED),
        "groups": grid(array),
    }


@require_GET
@login_required
@vary_on_headers("HX-Request")
def array_detail(request: PageRequest, array_id: uuid.UUID) -> HttpResponse:
    """The array's page; polled (htmx), its live part alone: 204 while it holds, 286 once every task has ended."""
    array = array_for(request.user, array_id)
    found, attempts = array_state.counts_ends_and_attempts(array)
    stage = array_state.stage_of(array, found)
    key = shown_key(array, found, attempts) if stage != Stage.RELEASE else ""
    polled = bool(request.htmx)
    if polled and key and request.headers.get(SHOWN_HEADER) == key:
        return HttpResponse(status=204)  # before the grid is read: an unchanged array's poll reads its counts alone
    context = _live_context(array, found, stage, key)
    if not polled:
        context |= {
            "upstream": pipelines.array_upstream(array),
            "downstream": pipelines.array_downstream(array),
            "made_by": pipelines.made_by(array),
        }
    template = "jobs/partials/array_live.html" if polled else "jobs/array_detail.html"
    tasks = array_state.failures_first(array).only(*TASK_COLUMNS)
    filters = TaskFilter(request.GET, queryset=tasks, request=request)
    context |= {"filters": filters, "place": request.GET.get("outcome", "")}
    if not filters.is_valid():
        return render(request, template, {**context, "tasks": []}, status=400)
    paginator = Paginator(filters.qs, TASKS_PAGE_SIZE)
    try:
        page = page_or_404(paginator, request.GET.get("page"))
    except Http404:
        if not polled:
            raise
        page = paginator.page(paginator.num_pages)  # its tasks moved on to other places: not an error at each poll
    context |= {
        "page": page,
        "page_numbers": page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
        "tasks": page.object_list,
    }
    response = render(request, template, context)
    if polled and not context["shown_key"]:
        return HttpResponseStopPolling(response.content)
    return response


@require_POST
@login_required
def array_cancel(request: PageRequest, array_id: uuid.UUID) -> HttpResponse:
    array = array_for(request.user, array_id)
    cancelled = cancel_array(array, now=timezone.now(), acting_user=request.user)
    if cancelled:
        messages.success(request, f"Cancel asked for {cancelled} task{'s' * (cancelled != 1)} of {array.name}.")
    else:
        messages.info(request, f"Every task of {array.name} had already ended.")
    if request.htmx:  # asked to confirm first (hx-confirm): the whole page is shown again
        return HttpResponseClientRedirect(reverse("jobs:array", kwargs={"array_id": array.pk}))
    return redirect("jobs:array", array_id=array.pk)


@require_POST
@login_required
def array_resubmit(request: PageRequest, array_id: uuid.UUID) -> HttpResponse:
    """A new array of the failed tasks' indices (none failed: a second click comes after a first)."""
    array = array_for(request.user, array_id)
    try:
        again = resubmit_array(array, only="failed", user=request.user)
    except NothingToResubmit:
        messages.info(request, f"No task of {array.name} failed: there is nothing to resubmit.")
        return redirect("jobs:array", array_id=array.pk)
    except Refused as refused:
        messages.error(request, refused.explanation())
        return redirect("jobs:array", array_id=array.pk)
    messages.success(request, f"Resubmitted the {again.size} failed task{'s' * (again.size != 1)} of {array.name}.")
    return redirect("jobs:array", array_id=again.pk)

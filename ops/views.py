"""/operator/ (operators only: anyone else gets 404) and /usage/ (a team's own usage)."""

from collections.abc import Iterator
from datetime import datetime, time, timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from accounting.csvexport import csv_lines
from core.pagination import page_or_404
from isolation.status import node_statuses, probe_summary
from jobs.access import visible_jobs
from jobs.models import Job
from jobs.storage.quotas import store_standings
from ops import panel, usage
from ops.filters import WINDOWS, UsageFilter
from ops.forms import NodeActionForm
from pool.models import Node
from pool.nodes import NodeOffline, set_state
from pool.placement.backfill import RESERVATIONS
from teams.access import SignedInRequest, is_operator, teams_of

USAGE_PAGE_SIZE = 50
ACTIONS = {
    "drain": (Node.State.DRAINING, "Drain"),
    "resume": (Node.State.ACTIVE, "Resume"),
}


def _operator_only(request: HttpRequest) -> None:
    if not is_operator(request.user):
        raise Http404("No such page.")


def _nodes_context(now: datetime) -> dict[str, Any]:
    return {"nodes": panel.node_rows(now=now), "now": now}


@require_GET
@login_required
def operator_panel(request: SignedInRequest) -> HttpResponse:
    _operator_only(request)
    now = timezone.now()
    running, running_count = panel.running_meters(now=now)
    queued, queued_count = panel.queue()
    failures, failures_count = panel.recent_failures(now=now)
    context = {
        **_nodes_context(now),
        "statuses": node_statuses(),
        "running": running,
        "running_count": running_count,
        "queued": queued,
        "queued_count": queued_count,
        "reserved": [job for job in queued if job.expected_start is not None],
        "reservations": RESERVATIONS,
        "lost": panel.lost_nodes(now=now),
        "failures": failures,
        "failures_count": failures_count,
        "probes": probe_summary(now=now),
        "teams": panel.usage_by_team(now=now),
        "chart": panel.utilisation(now=now),
    }
    return render(request, "ops/operator.html", context)


@require_GET
@login_required
def operator_nodes(request: SignedInRequest) -> HttpResponse:
    """The nodes' panel alone, polled by the page so a lost or drained node shows at once."""
    _operator_only(request)
    return render(request, "ops/partials/nodes.html", _nodes_context(timezone.now()))


@require_GET
@login_required
def node_detail(request: SignedInRequest, name: str) -> HttpResponse:
    _operator_only(request)
    node = get_object_or_404(Node.objects.select_related("state_changed_by"), name=name)
    now = timezone.now()
    return render(request, "ops/node.html", {"page": panel.node_page(node, now=now), "now": now})


def _confirmation(request: SignedInRequest, node: Node, action: str, form: NodeActionForm) -> HttpResponse:
    running = panel.jobs_running_on(node)
    context = {
        "node": node,
        "action": action,
        "verb": ACTIONS[action][1],
        "form": form,
        "running": running,
        "consequence": panel.drain_consequence(running) if action == "drain" else "",
    }
    return render(request, "ops/confirm.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@login_required
def node_action(request: SignedInRequest, name: str, action: str) -> HttpResponse:
    """Drain or resume a node: GET asks to confirm (and, for a drain, why), POST does it."""
    _operator_only(request)
    node = get_object_or_404(Node, name=name)
    if action not in ACTIONS:
        raise Http404("No such action.")
    state = ACTIONS[action][0]
    if request.method == "GET":
        return _confirmation(request, node, action, NodeActionForm(action=action))
    form = NodeActionForm(request.POST, action=action)
    if not form.is_valid():
        return _confirmation(request, node, action, form)
    try:
        set_state(node, state, now=timezone.now(), acting_user=request.user, reason=form.cleaned_data["reason"])
    except NodeOffline as exc:
        messages.error(request, str(exc))
    else:
        done = "drained: no new holds, its running jobs finish" if action == "drain" else "resumed: it accepts holds"
        messages.success(request, f"Node {node.name} {done}.")
    return redirect("ops:operator")


def _usage_filters(request: SignedInRequest) -> UsageFilter:
    jobs = visible_jobs(request.user).select_related("team", "image", "submitted_by").order_by("-submitted_at", "-id")
    return UsageFilter(request.GET, queryset=jobs, request=request)


def _window(filters: UsageFilter, now: datetime) -> tuple[datetime, datetime]:
    """The chart's span: from the latest start the filters give to the earliest end, else now; the last 30 days
    when none starts it."""
    data = filters.form.cleaned_data
    end = min((data[end] for _, end in WINDOWS if data.get(end)), default=now)
    start = max((data[start] for start, _ in WINDOWS if data.get(start)), default=None)
    return start or datetime.combine((end - timedelta(days=29)).date(), time(), tzinfo=end.tzinfo), end


@require_GET
@login_required
def usage_page(request: SignedInRequest) -> HttpResponse:
    """The caller's teams' usage (chart, totals, jobs with their cost) for the jobs the list's filters select."""
    filters = _usage_filters(request)
    context: dict[str, Any] = {"filters": filters, "stage": request.GET.get("stage", "")}
    if not filters.is_valid():
        return render(request, "ops/usage.html", {**context, "jobs": []}, status=400)
    filtered = any(filters.form.cleaned_data.values())
    records = usage.records_for(request.user, filters.qs if filtered else None)
    paginator: Paginator[Job] = Paginator(filters.qs, USAGE_PAGE_SIZE)
    page = page_or_404(paginator, request.GET.get("page"))
    jobs = list(page.object_list)
    costs = usage.costs_by_job([job.pk for job in jobs])
    now = timezone.now()
    start, end = _window(filters, now)
    team_ids = list(teams_of(request.user).values_list("pk", flat=True))
    context |= {
        "filtered": filtered,
        "page": page,
        "page_numbers": paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
        "rows": [(job, costs.get(job.pk)) for job in jobs],
        "totals": usage.totals(records, paginator.count, now=now, kept_for=None if filtered else team_ids),
        "chart": usage.over_time(records, start=start, end=end, now=now),
        "csv_query": request.GET.urlencode(),
        "store": store_standings(teams_of(request.user), now=now),
    }
    return render(request, "ops/usage.html", context)


@require_GET
@login_required
def usage_csv(request: SignedInRequest) -> HttpResponse | StreamingHttpResponse:
    """The per-job usage table with the same filters, every job selected, streamed."""
    filters = _usage_filters(request)
    if not filters.is_valid():
        errors = "; ".join(f"{name}: {' '.join(errs)}" for name, errs in filters.errors.items())
        return HttpResponse(f"Bad filter: {errors}\n", status=400, content_type="text/plain; charset=utf-8")
    lines: Iterator[str] = csv_lines(usage.csv_rows(filters.qs))
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-{timezone.now():%Y%m%d-%H%M}.csv"'
    return response

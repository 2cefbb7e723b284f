"""/isolation/: the boundaries, their mechanisms, and when each was last shown to hold on each node."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from isolation.models import ProbeResult
from isolation.status import boundaries, last_rounds, node_statuses


@require_GET
@login_required
def isolation_page(request: HttpRequest) -> HttpResponse:
    rounds = last_rounds()
    context = {"statuses": node_statuses(rounds), "boundaries": boundaries(rounds)}
    return render(request, "isolation/isolation.html", context)


@require_GET
@login_required
def probe_result(request: HttpRequest, result_id: int) -> HttpResponse:
    """One probe's evidence: the page, or its panel for htmx (the link on /isolation/ loads it in place)."""
    result = get_object_or_404(ProbeResult.objects.select_related("round__node", "job"), pk=result_id)
    template = "isolation/partials/evidence.html" if getattr(request, "htmx", False) else "isolation/result.html"
    return render(request, template, {"result": result, "round": result.round})

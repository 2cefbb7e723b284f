from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounting.access import team_for
from accounting.budgets import month_of
from accounting.statements import parse_month, pool_summary, statement
from teams.access import SignedInRequest, is_operator, teams_of
from teams.models import Team


@require_GET
@login_required
def statements(request: SignedInRequest) -> HttpResponse:
    now_month = month_of(timezone.now())
    month = parse_month(request.GET.get("month", "")) or now_month
    last = (month.replace(day=1) - timedelta(days=1)).replace(day=1)
    operator = is_operator(request.user)
    teams = Team.objects.all() if operator else teams_of(request.user)
    context = {
        "teams": list(teams.order_by("slug")),
        "month": month,
        "last_month": last,
        "summary": pool_summary(month) if operator else None,
    }
    return render(request, "accounting/statements.html", context)


@require_GET
@login_required
def statement_page(request: SignedInRequest, team: str, month: str) -> HttpResponse:
    first = parse_month(month)
    if first is None:
        raise Http404("No such month.")
    found = statement(team_for(request.user, team), first)
    return render(request, "accounting/statement.html", {"statement": found})

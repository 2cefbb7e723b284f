"""The accounting parts of the team's job pages: the form's estimate (htmx) and pinning outputs."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from jobs.access import job_for
from jobs.retention import PinRefused, pin
from jobs.serializers import EstimateRequest
from teams.access import SignedInRequest


@require_GET
@login_required
def estimate_partial(request: SignedInRequest) -> HttpResponse:
    """The worst case of the request typed in the form so far (empty until it is complete)."""
    asked = EstimateRequest(data={k: v for k, v in request.GET.items() if v != ""})
    found = asked.estimate(now=timezone.now()).as_dict() if asked.is_valid() else None
    return render(request, "accounting/partials/estimate.html", {"estimate": found})


@require_POST
@login_required
def job_pin(request: SignedInRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_for(request.user, job_id)
    try:
        pin(job, now=timezone.now())
        messages.info(request, "The outputs of this job are kept longer.")
    except PinRefused as exc:
        messages.error(request, str(exc))
    return redirect("jobs:detail", job_id=job.pk)

"""The browser side of submitting: the job list, the submit form and its estimate, submit again. Thin
views over the same domain functions as the API; the job's own page is jobs/job_page.py."""

import json
import re
import shlex
import uuid
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from core.pagination import page_or_404
from jobs.access import job_for, visible_jobs_by_team_ids
from jobs.figures import pool_now
from jobs.filters import JobPageFilter
from jobs.forms import JobForm
from jobs.models import Job, RuntimeImage
from jobs.serializers import EstimateRequest
from jobs.uploads import refused_upload, unnamed_files
from teams.access import SignedInRequest

PAGE_SIZE = 50
LIST_COLUMNS = [
    "id", "name", "stage", "outcome", "cpus", "memory_mb", "gpus", "time_limit_s", "submitted_at", "held_at",
    "released_at", "team__slug", "image__name", "submitted_by__username",
]  # fmt: skip


class PageRequest(SignedInRequest):
    """A login_required page's request, with what django-htmx's middleware adds (for annotations only)."""

    htmx: HtmxDetails


@require_GET
@login_required
def job_list(request: PageRequest) -> HttpResponse:
    """The caller's jobs, newest first, filtered by JobPageFilter and paged; a bad filter is 400."""
    # Only what the rows show: narrow rows sort in memory when a deep page of a large team needs a sort.
    jobs = (
        visible_jobs_by_team_ids(request.user)
        .select_related("team", "image", "submitted_by")
        .only(*LIST_COLUMNS)
        .order_by("-submitted_at", "-id")
    )
    filters = JobPageFilter(request.GET, queryset=jobs, request=request)
    context = {
        "filters": filters,
        "stage": request.GET.get("stage", ""),
        "sort": request.GET.get("sort", ""),
        "a_minute_ago": timezone.now() - timedelta(minutes=1),
    }
    template = "jobs/partials/job_rows.html" if request.htmx else "jobs/job_list.html"
    if not filters.is_valid():
        return render(request, template, {**context, "jobs": [], "filtered": True}, status=400)
    page = page_or_404(Paginator(filters.qs, PAGE_SIZE), request.GET.get("page"))
    context |= {
        "page": page,
        "page_numbers": page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
        "jobs": page.object_list,
        "filtered": any(filters.form.cleaned_data.values()),
    }
    return render(request, template, context)


def _form_context(
    request: HttpRequest, form: JobForm, submission: str, *, refused: str = "", resubmit_of: Job | None = None
) -> dict[str, Any]:
    return {
        "form": form,
        "submission": submission,
        # A browser never sends files back with a re-shown form: name them so they can be chosen again.
        # (A refused body was never parsed: no names then.)
        "data_chosen": [] if refused else [f.name for f in request.FILES.getlist("data")],
        "refused": refused,
        "pool": pool_now(),  # the largest node and what is free now, beside the request
        "images": list(RuntimeImage.objects.all()),
        "resubmit_of": resubmit_of,
    }


def _form_page(
    request: HttpRequest, form: JobForm, submission: str, *, status: int = 200, refused: str = ""
) -> HttpResponse:
    context = _form_context(request, form, submission, refused=refused)
    return render(request, "jobs/job_form.html", context, status=status)


@login_required
def submission_refused(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    """The submit form again, saying why the body sent was refused before it was read or parsed
    (e31site.middleware.declared_upload_limit); what was typed could not be kept."""
    return _form_page(request, JobForm(user=request.user), uuid.uuid4().hex, status=status, refused=message)


@require_http_methods(["GET", "POST"])
@login_required
def job_new(request: PageRequest) -> HttpResponse:
    """The submit form. Each rendering carries a submission key, so a double click or a resent
    POST finds the job the first one made instead of renting compute twice."""
    if request.method == "GET":
        return _form_page(request, JobForm(user=request.user), uuid.uuid4().hex)
    submission = request.POST.get("submission", "")
    if not re.fullmatch(r"[0-9a-f]{32}", submission):
        submission = uuid.uuid4().hex
    form = JobForm(request.POST, request.FILES, user=request.user, unnamed=unnamed_files(request))
    if why := refused_upload(request):
        form.is_valid()
        form.add_error("data", why)
        return _form_page(request, form, submission, status=413)
    if not form.is_valid():
        return _form_page(request, form, submission, status=400)
    # The same form sent twice (a double click, a resend) is the same job; sent again with other
    # values (back, edit, submit) it is a new one: the key names the form and what it declared.
    if (submitted := form.submit(key=f"form:{submission}")) is None:  # over budget: the form says why
        return _form_page(request, form, submission, status=402)
    job, created = submitted
    if not created:
        messages.info(request, "This form was sent before: here is the job it submitted.")
    else:
        messages.success(request, f"Job {job.name} submitted.")
    if request.htmx:  # the form sent by htmx (its upload progress shown): the browser goes to the job
        return HttpResponseClientRedirect(reverse("jobs:detail", args=[job.pk]))
    return redirect("jobs:detail", job_id=job.pk)


@require_GET
@login_required
def estimate_partial(request: SignedInRequest) -> HttpResponse:
    """The worst case of the request typed in the form so far (empty until it is complete)."""
    asked = EstimateRequest(data={k: v for k, v in request.GET.items() if v != ""})
    found = asked.estimate(now=timezone.now()).as_dict() if asked.is_valid() else None
    return render(request, "accounting/partials/estimate.html", {"estimate": found})


# --- submit again ---------------------------------------------------------------------------------


def _prefill(job: Job) -> dict[str, Any]:
    return {
        "team": job.team.slug,
        "name": job.name,
        "image": job.image.name,
        "command": shlex.join(job.command),
        "env": json.dumps(job.env) if job.env else "",
        "cpus": job.cpus,
        "memory_mb": job.memory_mb,
        "gpus": job.gpus,
        "time_limit_s": job.time_limit_s,
        "max_retries": job.max_retries,
        "isolation": job.isolation,
        "outputs": "\n".join(job.output_patterns),
    }


@require_http_methods(["GET", "POST"])
@login_required
def resubmit(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    """The submit form filled in from a job, its data files reused from the store; editable."""
    job = job_for(request.user, job_id)
    submission = request.POST.get("submission", "") if request.method == "POST" else ""
    if not re.fullmatch(r"[0-9a-f]{32}", submission):
        submission = uuid.uuid4().hex
    if request.method == "GET":
        form = JobForm(initial=_prefill(job), user=request.user, reuse_from=job)
        return render(request, "jobs/job_form.html", _form_context(request, form, submission, resubmit_of=job))
    form = JobForm(request.POST, request.FILES, user=request.user, unnamed=unnamed_files(request), reuse_from=job)
    if why := refused_upload(request):
        form.is_valid()
        form.add_error("data", why)
        status = 413
    elif not form.is_valid():
        status = 400
    elif (submitted := form.submit(key=f"form:{submission}")) is None:  # over budget: the form says why
        status = 402
    else:
        # As the submit form: the same form sent twice (a double click) is one new job, not two.
        new, created = submitted
        if created:
            messages.success(request, f"Submitted again as a new job (from {job.name}).")
        else:
            messages.info(request, "This form was sent before: here is the job it submitted.")
        if request.htmx:
            return HttpResponseClientRedirect(reverse("jobs:detail", args=[new.pk]))
        return redirect("jobs:detail", job_id=new.pk)
    context = _form_context(request, form, submission, resubmit_of=job)
    return render(request, "jobs/job_form.html", context, status=status)

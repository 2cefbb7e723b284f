"""The browser side: thin views over the same domain functions as the API."""

import re
import uuid
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling
from django_htmx.middleware import HtmxDetails

from core.pagination import page_or_404
from jobs import actions, logs, previews
from jobs.access import job_for, visible_jobs_by_team_ids
from jobs.api import output_response
from jobs.figures import figures, pool_now, state_key, timeline
from jobs.filters import JobPageFilter
from jobs.forms import JobForm
from jobs.history import events_of
from jobs.models import Job, Outcome, RuntimeImage
from jobs.queue import standing
from jobs.uploads import refused_upload, unnamed_files
from teams.access import SignedInRequest

PAGE_SIZE = 50
LIST_COLUMNS = [
    "id", "name", "stage", "outcome", "cpus", "memory_mb", "gpus", "time_limit_s", "submitted_at", "held_at",
    "released_at", "team__slug", "image__name", "submitted_by__username",
]  # fmt: skip
LOG_TAIL_BYTES = 64 * 1024


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


def _detail_context(job: Job) -> dict[str, Any]:
    records = list(job.records.select_related("hold").order_by("sequence"))
    output_files = list(job.output_files.all())
    return {
        "job": job,
        "hold": job.last_hold,
        "outputs": output_files,
        "outputs_size": sum(o.size for o in output_files),
        "data_files": list(job.data_files.all()),
        "records": records,
        "waiting": standing(job),
        "timeline": timeline(job),
        "history": list(events_of(job)),
        "figures": figures(job, records),
    }


def _log_context(job: Job) -> dict[str, Any]:
    log_pieces, log_offset, log_is_tail = logs.tail_pieces(job.pk, LOG_TAIL_BYTES)
    return {
        "log_lines": log_pieces,  # (text, class): "" stdout, "err" stderr, "sys" the platform's lines
        "log_offset": log_offset,
        "log_is_tail": log_is_tail,
    }


@require_GET
@login_required
def job_detail(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_for(request.user, job_id)
    context = _detail_context(job) | _log_context(job)
    if job.is_released and (metrics := previews.metrics_of(job, context["outputs"])) is not None:
        charts = previews.metric_charts(job, metrics)
        context |= {"metrics": metrics, "charts": charts, "metric_runs": previews.METRIC_RUNS}
    return render(request, "jobs/job_detail.html", context)


@require_GET
@login_required
def job_live(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    """The polled part of the job page; polling stops once the job is released. Asked with the state it
    shows (`v`), it answers 204 while nothing changed: htmx then swaps nothing, so focus, selection and
    scroll inside it survive the polling."""
    job = job_for(request.user, job_id)
    if not job.is_released and request.GET.get("v") == state_key(job):
        return HttpResponse(status=204)
    response = render(request, "jobs/partials/job_live.html", _detail_context(job))
    if job.is_released:
        return HttpResponseStopPolling(response.content)
    return response


@require_POST
@login_required
def job_cancel(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    job = actions.cancel(job_for(request.user, job_id), now=timezone.now(), acting_user=request.user)
    if not job.is_released:
        messages.success(request, f"Cancel asked for {job.name}: its node stops it and collects its outputs.")
    elif job.outcome == Outcome.CANCELLED and job.cancelled_by_id == request.user.pk:
        messages.success(request, f"Cancelled {job.name}.")
    else:
        messages.info(request, f"{job.name} had already ended ({job.get_outcome_display().lower()}).")
    if request.htmx:
        return render(request, "jobs/partials/job_live.html", _detail_context(job) | {"oob_messages": True})
    return redirect("jobs:detail", job_id=job.pk)


@require_GET
@login_required
def job_output(request: PageRequest, job_id: uuid.UUID, path: str) -> FileResponse:
    return output_response(job_for(request.user, job_id), path)


@require_GET
@login_required
def job_log(request: PageRequest, job_id: uuid.UUID) -> FileResponse:
    job = job_for(request.user, job_id)
    data, _ = logs.read_log(job.pk, 0, limit=1 << 30)  # bounded by E31_LOG_MAX_KB
    if not data and not job.started_at:
        raise Http404("This job has no log yet.")
    return FileResponse(iter([data]), content_type="text/plain; charset=utf-8")

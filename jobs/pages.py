"""The dashboard's pages beside jobs/views.py: the morning review, the job page's live log lines,
output previews and the zip of all outputs, resubmit. Thin: the rules are in jobs/review.py,
jobs/previews.py, jobs/forms.py and jobs/submission.py."""

import json
import re
import shlex
import uuid
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from core.filters import MomentField
from jobs import logs, previews, review
from jobs.access import job_for, visible_jobs_by_team_ids
from jobs.forms import JobForm
from jobs.models import Job, Stage
from jobs.uploads import refused_upload, unnamed_files
from jobs.views import PageRequest, _form_context, _page
from teams.access import teams_of

REVIEW_PAGE_SIZE = 25  # ended jobs per page of the review (each is a card of figures)
WAITING_SHOWN = 20  # the review lists the head of the queue; the rest are a link to the filtered list
LOG_LINES_BYTES = 256 * 1024  # one poll of the live log brings at most this much


class ReviewForm(forms.Form):
    # As the lists' since/until (core.filters.MomentField): cleaned to UTC and taken into the calendar, so
    # an offset past PostgreSQL's ±15:59 or a moment off the calendar is no database error.
    since = MomentField(required=False)
    until = MomentField(required=False)


def _zone_of(request: PageRequest) -> Any:
    team = teams_of(request.user).order_by("slug").first()
    return team.zone if team is not None else timezone.get_default_timezone()


@require_GET
@login_required
def review_page(request: PageRequest) -> HttpResponse:
    """What ended since a time (default: 18:00 yesterday in the team's zone), failures first; counts by
    outcome; what runs and waits now. A bad `since`/`until` is 400. A time without an offset is read in
    the team's zone, and the form shows it there."""
    now = timezone.now()
    zone = _zone_of(request)
    with timezone.override(zone):
        form = ReviewForm(request.GET)
        if not form.is_valid():
            return render(request, "jobs/review.html", {"form": form, "zone": zone}, status=400)
        since: datetime = form.cleaned_data["since"] or review.default_since(now, zone)
        until: datetime | None = form.cleaned_data["until"]
        jobs = visible_jobs_by_team_ids(request.user)
        page = _page(Paginator(review.ended(jobs, since=since, until=until), REVIEW_PAGE_SIZE), request.GET.get("page"))
        context = {
            "form": form,
            "zone": zone,
            "since": since,
            "until": until,
            "page": page,
            "page_numbers": page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
            "ended": [(job, review.figures(job)) for job in page.object_list],
            "counts": review.outcome_counts(jobs, now=now),
            "windows": [label for label, _ in review.WINDOWS],
            **_now_context(jobs, now),
        }
        return render(request, "jobs/review.html", context)


def _now_context(jobs: Any, now: datetime) -> dict[str, Any]:
    waiting = review.waiting(jobs)
    head = list(waiting[: WAITING_SHOWN + 1])
    return {
        "now": now,
        "running": [(job, *review.progress(job, now)) for job in review.running(jobs)],
        "waiting": head[:WAITING_SHOWN],
        "waiting_more": len(head) > WAITING_SHOWN,
    }


@require_GET
@login_required
def review_now(request: PageRequest) -> HttpResponse:
    """The review's running and waiting jobs, polled by the page."""
    context = _now_context(visible_jobs_by_team_ids(request.user), timezone.now())
    return render(request, "jobs/partials/review_now.html", context)


# --- the job page -------------------------------------------------------------------------------


@require_GET
@login_required
def log_lines(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    """The log from byte `offset` on, as lines to append to the page's log; the poller comes back out
    of band with the next offset, and without a trigger once the job is released and read to the end."""
    job = job_for(request.user, job_id)
    try:
        offset = int(request.GET.get("offset", "0"))
    except ValueError:
        return HttpResponse("offset: a whole number of bytes", status=400, content_type="text/plain")
    if not 0 <= offset < 2**63:
        return HttpResponse("offset: out of range", status=400, content_type="text/plain")
    data, next_offset = logs.read_log(job.pk, offset, limit=LOG_LINES_BYTES)
    # Only whole lines, so a line is never split between two polls (unless one line is over the limit).
    if job.stage != Stage.RELEASE or len(data) == LOG_LINES_BYTES:
        cut = data.rfind(b"\n") + 1
        if cut and cut < len(data):
            data, next_offset = data[:cut], offset + cut
        elif not cut and len(data) < LOG_LINES_BYTES:
            data, next_offset = b"", offset
    lines = logs.read_pieces(job.pk, data, offset)  # (text, class): "" stdout, "err" stderr, "sys" the platform
    done = job.is_released and next_offset == offset + len(data) and len(data) < LOG_LINES_BYTES
    context = {"job": job, "lines": lines, "offset": next_offset, "done": done}
    return render(request, "jobs/partials/log_lines.html", context)


@require_GET
@login_required
def output_preview(request: PageRequest, job_id: uuid.UUID, path: str) -> HttpResponse:
    job = job_for(request.user, job_id)
    output = get_object_or_404(job.output_files, path=path)
    try:
        shown = previews.preview(job, output)
    except FileNotFoundError:
        raise Http404("The output is no longer in the store.") from None
    return render(request, "jobs/partials/preview.html", {"job": job, "output": output, "preview": shown})


@require_GET
@login_required
def output_image(request: PageRequest, job_id: uuid.UUID, path: str) -> HttpResponse:
    """A PNG output inline, for its preview: only a real PNG, and sandboxed whatever it holds."""
    job = job_for(request.user, job_id)
    output = get_object_or_404(job.output_files, path=path)
    try:
        data = previews.png_bytes(job, output)
    except FileNotFoundError:
        data = None
    if data is None:
        raise Http404("Not a PNG output.")
    response = HttpResponse(data, content_type="image/png")
    response["Content-Disposition"] = "inline"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
@login_required
def outputs_zip(request: PageRequest, job_id: uuid.UUID) -> HttpResponse | StreamingHttpResponse:
    """Every output in one zip, streamed; 410 once retention deleted the files (their list stays on the
    job page), instead of a zip cut short when the first file is missing from the store."""
    job = job_for(request.user, job_id)
    if job.files_deleted_at is not None:
        return _files_deleted(request, job, job.files_deleted_at)
    files = list(job.output_files.all())
    if not files:
        raise Http404("This job has no outputs.")
    response = StreamingHttpResponse(previews.zip_stream(job, files), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="outputs-{job.pk}.zip"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _files_deleted(request: PageRequest, job: Job, deleted_at: datetime) -> HttpResponse:
    context = {
        "code": 410,
        "heading": "The outputs were deleted",
        "text": f"The outputs of {job.name} were deleted on {deleted_at:%Y-%m-%d %H:%M} UTC, at the end of "
        "their retention; their names, sizes and sha256 are still listed on the job's page.",
    }
    return render(request, "error.html", context, status=410)


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

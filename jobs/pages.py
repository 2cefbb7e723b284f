"""The job's pages beside jobs/views.py: the job page's live log lines, output previews and the zip of
all outputs, resubmit. Thin: the rules are in jobs/previews.py, jobs/forms.py and jobs/submission.py."""

import json
import re
import shlex
import uuid
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from jobs import logs, previews
from jobs.access import job_for
from jobs.forms import JobForm
from jobs.models import Job, Stage
from jobs.uploads import refused_upload, unnamed_files
from jobs.views import PageRequest, _form_context

LOG_LINES_BYTES = 256 * 1024  # one poll of the live log brings at most this much


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

"""The job's page and its parts: live part, log, outputs and their previews, cancel and pin; the rules live in the
domain modules."""

import uuid
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from core.bounds import BIGINT_MAX, column_bounds
from jobs.access import job_for, output_for
from jobs.api.jobs import output_response
from jobs.lifecycle import actions
from jobs.lifecycle.history import events_of
from jobs.lifecycle.resubmits import resubmissions_of, resubmit_of
from jobs.models import Job, LogChunk, Outcome, Stage
from jobs.scheduling.queue import standing
from jobs.storage import logs
from jobs.storage.retention import PinRefused, pin
from jobs.storage.store import zip_stream
from jobs.web import pipelines
from jobs.web.figures import figures, running, state_key, timeline
from jobs.web.previews import png_bytes, preview
from jobs.web.views import PageRequest

LOG_TAIL_BYTES = 64 * 1024  # the job page shows the log's tail; the rest is the download
LOG_LINES_BYTES = 256 * 1024  # one poll of the live log brings at most this much


class LogLinesQuery(forms.Form):
    """Where a poll of the live log reads from: a byte offset (default 0), and that byte's line number."""

    offset = forms.IntegerField(**column_bounds(LogChunk, "offset", least=0))
    line = forms.IntegerField(min_value=1, max_value=BIGINT_MAX, required=False)


def _detail_context(job: Job) -> dict[str, Any]:
    now = timezone.now()
    records = list(job.records.select_related("hold").order_by("sequence"))
    output_files = list(job.output_files.all())
    history = list(events_of(job))
    return {
        "job": job,
        "hold": job.last_hold,
        "outputs": output_files,
        "outputs_size": sum(o.size for o in output_files),
        "data_files": list(job.data_files.all()),
        "records": records,
        "waiting": standing(job),
        "timeline": timeline(job, history),
        "running": running(job, now),
        "now": now,
        "history": history,
        "figures": figures(job, records),
        "preempt_grace_s": settings.E31_PREEMPT_GRACE_S,
    }


@require_GET
@login_required
def job_detail(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_for(request.user, job_id)
    # A running job's last line not ended yet is left to the poller, which brings it whole.
    log_lines, log_offset, log_line, log_is_tail = logs.tail_lines(
        job.pk, LOG_TAIL_BYTES, whole_lines=not job.is_released
    )
    log = {"log_lines": log_lines, "log_offset": log_offset, "log_line": log_line, "log_is_tail": log_is_tail}
    return render(request, "jobs/job_detail.html", _detail_context(job) | log | _chain_context(job))


def _chain_context(job: Job) -> dict[str, Any]:
    """What only the whole page shows, not its polled part."""
    return {
        "upstream": pipelines.upstream_of(job),
        "downstream": pipelines.downstream_of(job),
        "attempts": pipelines.attempts_shown(job) if job.past_attempts else [],
        "made_by": pipelines.made_by(job),
        "resubmit_of": resubmit_of(job),
        "resubmissions": resubmissions_of(job),
    }


@require_GET
@login_required
def job_live(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    """The polled part of the job page: 204 while the state it shows (`v`) holds, so focus and scroll survive."""
    job = job_for(request.user, job_id)
    if not job.is_released and request.GET.get("v") == state_key(job):
        return HttpResponse(status=204)
    response = render(request, "jobs/partials/job_live.html", _detail_context(job) | {"with_after": True})
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
        context = _detail_context(job) | {"oob_messages": True, "with_after": True}
        return render(request, "jobs/partials/job_live.html", context)
    return redirect("jobs:detail", job_id=job.pk)


@require_GET
@login_required
def job_output(request: PageRequest, job_id: uuid.UUID, path: str) -> FileResponse | HttpResponseRedirect:
    return output_response(output_for(request.user, job_id, path))


@require_GET
@login_required
def job_log(request: PageRequest, job_id: uuid.UUID) -> FileResponse:
    job = job_for(request.user, job_id)
    data, _ = logs.read_log(job.pk, 0, limit=1 << 30)  # bounded by E31_LOG_MAX_KB
    if not data and not job.started_at:
        raise Http404("This job has no log yet.")
    return FileResponse(iter([data]), content_type="text/plain; charset=utf-8")


@require_GET
@login_required
def log_lines(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    """Whole log lines from byte `offset` for the page to append, numbered on from `line` (the number of the
    line at `offset`; counted when not given), with the poller's next offset and line out of band."""
    job = job_for(request.user, job_id)
    query = LogLinesQuery({"offset": "0", **request.GET.dict()})  # `offset=` is no number, not left out
    if not query.is_valid():
        said = "; ".join(f"{name}: {' '.join(map(str, messages))}" for name, messages in query.errors.items())
        return HttpResponse(said, status=400, content_type="text/plain")
    offset, line = query.cleaned_data["offset"], query.cleaned_data["line"]
    data, next_offset = logs.read_log(job.pk, offset, limit=LOG_LINES_BYTES)
    # The byte before `offset` says whether it begins a line (only a line over the limit is split).
    continues = bool(offset and data) and logs.read_log(job.pk, offset - 1, limit=1)[0] != b"\n"
    # Whole lines, unless one is over the limit, so no line is split between two polls.
    if job.stage != Stage.RELEASE or len(data) == LOG_LINES_BYTES:
        cut = data.rfind(b"\n") + 1
        if cut and cut < len(data):
            data, next_offset = data[:cut], offset + cut
        elif not cut and len(data) < LOG_LINES_BYTES:
            data, next_offset = b"", offset
    if line is None:
        line = 1 + logs.lines_before(job.pk, offset)
    lines = logs.numbered(logs.read_pieces(job.pk, data, offset), line + continues, continues=continues)
    done = job.is_released and next_offset == offset + len(data) and len(data) < LOG_LINES_BYTES
    context = {"job": job, "lines": lines, "offset": next_offset, "line": line + data.count(b"\n"), "done": done}
    return render(request, "jobs/partials/log_lines.html", context)


@require_GET
@login_required
def outputs_zip(request: PageRequest, job_id: uuid.UUID) -> HttpResponse | StreamingHttpResponse:
    """Every output in one streamed zip; 410 once retention deleted them, not a zip cut short."""
    job = job_for(request.user, job_id)
    if (deleted_at := job.files_deleted_at) is not None:
        text = (
            f"The outputs of {job.name} were deleted on {deleted_at:%Y-%m-%d %H:%M} UTC, at the end of their "
            "retention; their names, sizes and sha256 are still listed on the job's page."
        )
        context = {"code": 410, "heading": "The outputs were deleted", "text": text}
        return render(request, "error.html", context, status=410)
    paths = list(job.output_files.values_list("path", "size"))
    if not paths:
        raise Http404("This job has no outputs.")
    response = StreamingHttpResponse(zip_stream(job.pk, paths), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="outputs-{job.pk}.zip"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_POST
@login_required
def job_pin(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_for(request.user, job_id)
    try:
        pin(job, now=timezone.now())
        messages.info(request, "The outputs of this job are kept longer.")
    except PinRefused as exc:
        messages.error(request, str(exc))
    return redirect("jobs:detail", job_id=job.pk)


@require_GET
@login_required
def output_preview(request: PageRequest, job_id: uuid.UUID, path: str) -> HttpResponse:
    output = output_for(request.user, job_id, path)
    job = output.job
    try:
        shown = preview(job, output)
    except FileNotFoundError:
        raise Http404("The output is no longer in the store.") from None
    return render(request, "jobs/partials/preview.html", {"job": job, "output": output, "preview": shown})


@require_GET
@login_required
def output_image(request: PageRequest, job_id: uuid.UUID, path: str) -> HttpResponse:
    """A real PNG output inline for its preview, sandboxed whatever it holds."""
    output = output_for(request.user, job_id, path)
    try:
        data = png_bytes(output.job, output)
    except FileNotFoundError:
        data = None
    if data is None:
        raise Http404("Not a PNG output.")
    response = HttpResponse(data, content_type="image/png")
    response["Content-Disposition"] = "inline"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["X-Content-Type-Options"] = "nosniff"
    return response

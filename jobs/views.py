"""The browser side: thin views over the same domain functions as the API."""

from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from jobs import lifecycle, logs
from jobs.access import job_for, visible_jobs
from jobs.api import output_response
from jobs.forms import JobForm
from jobs.staging import log_key
from jobs.submission import submit
from jobs.uploads import refused_upload

LIST_SIZE = 100


@require_GET
@login_required
def job_list(request):
    jobs = visible_jobs(request.user).select_related("team", "image").order_by("-submitted_at")
    if stage := request.GET.get("stage"):
        jobs = jobs.filter(stage=stage)
    context = {"jobs": jobs[:LIST_SIZE], "stage": stage}
    template = "jobs/partials/job_rows.html" if request.htmx else "jobs/job_list.html"
    return render(request, template, context)


@require_http_methods(["GET", "POST"])
@login_required
def job_new(request):
    if request.method == "GET":
        return render(request, "jobs/job_form.html", {"form": JobForm(user=request.user)})
    form = JobForm(request.POST, request.FILES, user=request.user)
    if why := refused_upload(request):
        form.is_valid()
        form.add_error("data", why)
        return render(request, "jobs/job_form.html", {"form": form}, status=413)
    if not form.is_valid():
        return render(request, "jobs/job_form.html", {"form": form}, status=400)
    job, _ = submit(form.declaration(), user=request.user)
    return redirect("jobs:detail", job_id=job.pk)


def _detail_context(job) -> dict:
    return {
        "job": job,
        "hold": job.last_hold,
        "log_tail": logs.tail(job.pk),
        "outputs": list(job.output_files.all()),
        "data_files": list(job.data_files.all()),
        "records": list(job.records.order_by("sequence")),
    }


@require_GET
@login_required
def job_detail(request, job_id):
    job = job_for(request.user, job_id)
    return render(request, "jobs/job_detail.html", _detail_context(job))


@require_GET
@login_required
def job_live(request, job_id):
    """The polled part of the job page; polling stops once the job is released."""
    job = job_for(request.user, job_id)
    response = render(request, "jobs/partials/job_live.html", _detail_context(job))
    if job.is_released:
        return HttpResponseStopPolling(response.content)
    return response


@require_POST
@login_required
def job_cancel(request, job_id):
    job = lifecycle.cancel(job_for(request.user, job_id), now=timezone.now())
    if request.htmx:
        return render(request, "jobs/partials/job_live.html", _detail_context(job))
    return redirect("jobs:detail", job_id=job.pk)


@require_GET
@login_required
def job_output(request, job_id, path):
    return output_response(job_for(request.user, job_id), path)


@require_GET
@login_required
def job_log(request, job_id):
    job = job_for(request.user, job_id)
    key = log_key(job.pk)
    if default_storage.exists(key):
        return FileResponse(default_storage.open(key, "rb"), content_type="text/plain; charset=utf-8")
    data, _ = logs.read_log(job.pk, 0, limit=1 << 30)
    if not data and not job.started_at:
        raise Http404("This job has no log yet.")
    return FileResponse(iter([data]), content_type="text/plain; charset=utf-8")

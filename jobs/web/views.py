"""Submitting from the browser: the job list, the submit form and its estimate, submit again."""

import dataclasses
import hashlib
import json
import re
import uuid
from datetime import timedelta
from typing import Any

from django import forms
from django.conf import settings
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
from jobs.api.filters import NOT_SUCCEEDED, JobPageFilter
from jobs.api.serializers import EstimateRequest
from jobs.lifecycle.resubmits import MemoryProposal, memory_proposal
from jobs.models import Job, JobArray, RuntimeImage
from jobs.submit.again import declared_fields
from jobs.submit.arrays import ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.forms import ArrayForm, JobForm
from jobs.submit.indices import BadIndices, parse_indices
from jobs.submit.uploads import refused_upload, unnamed_files
from jobs.web.figures import pool_now, with_row_figures
from teams.access import SignedInRequest

PAGE_SIZE = 50
ESTIMATED = ("cpus", "memory_mb", "gpus", "time_limit_s", "image")  # the fields the worst case is of
# The form's "More" section, folded unless one of them is in error or set: an array, dependencies, retries.
MORE = (
    "indices", "max_running", "stop_after_failures", "after_ok", "after_any", "after_not_ok", "inputs_from",
    "max_retries", "retry_on", "retry_memory_factor", "retry_delay_s",
)  # fmt: skip
LIST_COLUMNS = [
    "id", "name", "array_index", "stage", "outcome", "cpus", "memory_mb", "gpus", "time_limit_s", "submitted_at",
    "held_at", "started_at", "finished_at", "released_at", "team__slug", "image__name", "submitted_by__username",
    "failure_excerpt",
]  # fmt: skip


class PageRequest(SignedInRequest):
    """A login_required page's request with django-htmx's details, for annotations."""

    htmx: HtmxDetails


@require_GET
@login_required
def job_list(request: PageRequest) -> HttpResponse:
    """The caller's jobs, newest first, filtered by JobPageFilter and paged; a bad filter is 400."""
    # Only what the rows show: narrow rows sort in memory when a deep page needs a sort.
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
        "outcomes": request.GET.getlist("outcome"),
        "not_succeeded": NOT_SUCCEEDED,
        "not_succeeded_on": set(request.GET.getlist("outcome")) == set(NOT_SUCCEEDED),
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
        "jobs": with_row_figures(list(page.object_list)),
        "filtered": any(filters.form.cleaned_data.values()),
        "filters_applied": sum(1 for value in filters.form.cleaned_data.values() if value),
    }
    return render(request, template, context)


def submission_key(request: HttpRequest) -> str:
    """The form's submission key as sent back, else a new one: a double click or a resent POST finds the first job."""
    key = request.POST.get("submission", "")
    return key if re.fullmatch(r"[0-9a-f]{32}", key) else uuid.uuid4().hex


def _form_page(
    request: HttpRequest,
    form: ArrayForm,
    submission: str,
    *,
    status: int = 200,
    refused: str = "",
    resubmit_of: Job | None = None,
) -> HttpResponse:
    context = {
        "form": form,
        "submission": submission,
        # A browser never sends files back with a re-shown form: name them so they can be chosen again.
        "data_chosen": [] if refused else request.FILES.getlist("data"),
        "refused": refused,
        # On the page from the start (the defaults, the earlier job's, or what was sent), as it is after a change.
        "estimate": _worst_case(_typed_request(form)),
        "tasks": _tasks(form["indices"].value()),
        "pool": pool_now(),
        "images": list(RuntimeImage.objects.all()),
        "resubmit_of": resubmit_of,
        "more_open": _more_open(form),
    }
    return render(request, "jobs/job_form.html", context, status=status)


def _more_open(form: forms.Form) -> bool:
    """Whether a field of the "More" section is in error, or holds other than its default (so it is seen)."""

    def changed(name: str) -> bool:
        value = _shown(form[name].value())
        return bool(value) and not _same(value, _shown(form.fields[name].initial))

    return any(form[name].errors or changed(name) for name in MORE if name in form.fields)


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v).strip() for v in value if str(v).strip())
    return "" if value is None else str(value).strip()


def _same(value: str, initial: str) -> bool:
    try:
        return float(value) == float(initial)  # 1 and 1.0 are the same factor
    except ValueError:
        return value == initial


@login_required
def submission_refused(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    """The submit form again, saying why the middleware refused the body unread (so nothing typed is kept)."""
    return _form_page(request, _form(user=request.user), uuid.uuid4().hex, status=status, refused=message)


def _form(*args: Any, **kwargs: Any) -> ArrayForm:
    return ArrayForm(*args, indices_required=False, **kwargs)


def _submit_page(request: PageRequest, *, reuse_from: Job | None = None) -> HttpResponse:
    """GET shows the submit form (filled in from `reuse_from`); POST submits one job, or an array."""
    submission = submission_key(request)
    proposal = memory_proposal(reuse_from) if reuse_from else None
    if request.method == "GET":
        initial = declared_fields(reuse_from) if reuse_from else None
        if initial is not None and proposal is not None:  # it ran out of memory: more is proposed
            initial["memory_mb"] = proposal.proposed_mb
        form = _form(initial=initial, user=request.user, reuse_from=reuse_from)
        _say_proposal(form, proposal)
        return _form_page(request, form, submission, resubmit_of=reuse_from)
    unnamed = unnamed_files(request)
    form = _form(request.POST, request.FILES, user=request.user, unnamed=unnamed, reuse_from=reuse_from)
    _say_proposal(form, proposal)
    if why := refused_upload(request):
        form.is_valid()
        form.add_error("data", why)
        status = 413
    elif not form.is_valid():
        status = 400
    elif form.cleaned_data["indices"]:
        key = array_key(f"form:{submission}", form.declaration(), form.array_request())
        if (array := form.submit_array(key=key)) is None:  # refused: the form says why
            status = form.refused_status
        else:
            return to_array(request, array)
    elif (submitted := form.submit(key=f"form:{submission}")) is None:  # refused: the form says why
        status = form.refused_status
    else:
        job, created = submitted
        if not created:
            messages.info(request, "This form was sent before: here is the job it submitted.")
        elif reuse_from is not None:
            messages.success(request, f"Submitted again as a new job (from {reuse_from.name}).")
        else:
            messages.success(request, f"Job {job.name} submitted.")
        if request.htmx:  # sent by htmx to show the upload's progress: the browser goes to the job
            return HttpResponseClientRedirect(reverse("jobs:detail", args=[job.pk]))
        return redirect("jobs:detail", job_id=job.pk)
    return _form_page(request, form, submission, status=status, resubmit_of=reuse_from)


def _say_proposal(form: ArrayForm, proposal: MemoryProposal | None) -> None:
    """Why the memory field holds more than the earlier job asked for, next to it (its help text)."""
    if proposal is not None:
        form.fields["memory_mb"].help_text = proposal.words


def array_key(key: str, declaration: Declaration, array_request: ArrayRequest) -> str:
    """The form's key and a digest of what it declares: the form sent again with other values is another array."""
    text = json.dumps([declaration.fingerprint, dataclasses.asdict(array_request)], sort_keys=True)
    return f"{key}:{hashlib.sha256(text.encode()).hexdigest()}"


def to_array(request: SignedInRequest, array: JobArray) -> HttpResponse:
    if array.created:
        messages.success(request, f"Array {array.name} submitted: {array.size} tasks.")
    else:
        messages.info(request, "This form was sent before: here is the array it submitted.")
    if getattr(request, "htmx", False):  # sent by htmx to show the upload's progress: the browser goes there
        return HttpResponseClientRedirect(reverse("jobs:array", args=[array.pk]))
    return redirect("jobs:array", array_id=array.pk)


@require_http_methods(["GET", "POST"])
@login_required
def job_new(request: PageRequest) -> HttpResponse:
    return _submit_page(request)


def _typed_request(form: JobForm) -> dict[str, Any]:
    """The estimated fields as the form shows them; with no image yet, the one its box shows first."""
    typed = {name: form[name].value() for name in ESTIMATED}
    return typed if typed["image"] or not form.images else typed | {"image": next(iter(form.images))}


def _worst_case(typed: dict[str, Any]) -> dict[str, Any] | None:
    """The worst case of a request as typed, or None while it is incomplete or out of bounds."""
    asked = EstimateRequest(data={k: v for k, v in typed.items() if v not in ("", None)})
    return asked.estimate(now=timezone.now()).as_dict() if asked.is_valid() else None


@require_GET
@login_required
def estimate_partial(request: SignedInRequest) -> HttpResponse:
    """The worst case of the request typed so far; empty until it is complete."""
    found = _worst_case({name: request.GET.get(name) for name in ESTIMATED})
    context = {"estimate": found, "tasks": _tasks(request.GET.get("indices"))}
    return render(request, "accounting/partials/estimate.html", context)


def _tasks(indices: Any) -> int:
    """The tasks of an array's indices as typed; 1 (one job) while there are none, or they do not read."""
    if not isinstance(indices, str) or not indices.strip():
        return 1
    try:
        return len(parse_indices(indices, most=settings.E31_ARRAY_MAX_TASKS))
    except BadIndices:
        return 1


@require_http_methods(["GET", "POST"])
@login_required
def resubmit(request: PageRequest, job_id: uuid.UUID) -> HttpResponse:
    return _submit_page(request, reuse_from=job_for(request.user, job_id))

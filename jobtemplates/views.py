"""/templates/: pick a template, fill in its parameters, submit; save a job of yours as a team template."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from jobs.access import job_for, visible_jobs
from jobs.views import submission_key
from jobtemplates.access import template_for, visible_templates
from jobtemplates.forms import SaveTemplateForm, TemplateRunForm
from jobtemplates.saving import CommandTooLong, save_as_template
from teams.access import SignedInRequest

RECENT_JOBS = 10


@require_GET
@login_required
def template_list(request: SignedInRequest) -> HttpResponse:
    templates = visible_templates(request.user).select_related("image", "team")
    recent = visible_jobs(request.user).filter(submitted_by=request.user).select_related("image")
    context = {
        "operators_templates": [t for t in templates if t.team_id is None],
        "team_templates": [t for t in templates if t.team_id is not None],
        "recent_jobs": list(recent.order_by("-submitted_at")[:RECENT_JOBS]),
    }
    return render(request, "jobtemplates/template_list.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def template_run(request: SignedInRequest, template_id: int) -> HttpResponse:
    """GET shows the template's form; POST submits the job, once per submission key as /jobs/new/ does."""
    template = template_for(request.user, template_id)
    if request.method == "GET":
        form = TemplateRunForm(template=template, user=request.user)
        return _run_page(request, form, uuid.uuid4().hex)
    submission = submission_key(request)
    form = TemplateRunForm(request.POST, template=template, user=request.user)
    if not form.is_valid() or form.job_form is None:
        return _run_page(request, form, submission, status=400)
    if (submitted := form.submit(key=f"template:{submission}")) is None:  # over budget: the form says why
        return _run_page(request, form, submission, status=402)
    job, created = submitted
    if created:
        messages.success(request, f"Submitted {job.name} from the template {template.name}.")
    else:
        messages.info(request, "This form was sent before: here is the job it submitted.")
    return redirect("jobs:detail", job_id=job.pk)


def _run_page(request: SignedInRequest, form: TemplateRunForm, submission: str, *, status: int = 200) -> HttpResponse:
    context = {"form": form, "template": form.template, "submission": submission}
    return render(request, "jobtemplates/template_run.html", context, status=status)


@require_POST
@login_required
def save_job_as_template(request: SignedInRequest, job_id: uuid.UUID) -> HttpResponse:
    """Save a job of the caller's team as a template of that team (another team's job is 404)."""
    job = job_for(request.user, job_id)
    form = SaveTemplateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not saved: the name " + " ".join(str(e) for e in form.errors.get("name", [])))
        return redirect("jobs:detail", job_id=job.pk)
    try:
        template = save_as_template(job, user=request.user, name=form.cleaned_data["name"])
    except CommandTooLong as exc:
        messages.error(request, f"Not saved: {exc}")
        return redirect("jobs:detail", job_id=job.pk)
    messages.success(request, f"Saved {job.name} as the template {template.name} of the team {job.team.slug}.")
    return redirect("jobtemplates:run", template_id=template.pk)

"""/templates/: pick a template, fill in its parameters, submit; save a job of yours as a team template; attach
and remove a template's data files."""

import functools
import uuid
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounting.store_quotas import OverQuota
from jobs.access import job_for, visible_jobs
from jobs.submit.uploads import refused_upload, unnamed_files
from jobs.web.views import array_key, submission_key, to_array
from jobtemplates import files
from jobtemplates.access import template_for, visible_templates
from jobtemplates.forms import AttachFilesForm, SaveTemplateForm, TemplateRunForm
from jobtemplates.models import JobTemplate
from jobtemplates.saving import CommandTooLong, DataGone, save_as_template
from teams.access import SignedInRequest

RECENT_JOBS = 10


@require_GET
@login_required
def template_list(request: SignedInRequest) -> HttpResponse:
    templates = visible_templates(request.user).select_related("image", "team").annotate(data_files=Count("files"))
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
    """POST submits the job, once per submission key as /jobs/new/ does."""
    template = template_for(request.user, template_id)
    if request.method == "GET":
        form = TemplateRunForm(template=template, user=request.user)
        return _template_page(request, form, uuid.uuid4().hex)
    submission = submission_key(request)
    unnamed = unnamed_files(request)
    form = TemplateRunForm(request.POST, request.FILES, template=template, user=request.user, unnamed=unnamed)
    if why := refused_upload(request):
        form.is_valid()
        form.add_error("data", f"The upload is too large: {why}.")
        return _template_page(request, form, submission, status=413)
    if not form.is_valid() or form.job_form is None:
        return _template_page(request, form, submission, status=400)
    if form.is_array:  # the template presets indices, or they were typed: its run is an array
        key = array_key(f"template:{submission}", form.declaration(), form.array_request())
        if (array := form.submit_array(key=key)) is None:  # refused: the form says why
            return _template_page(request, form, submission, status=form.refused_status)
        return to_array(request, array)
    if (submitted := form.submit(key=f"template:{submission}")) is None:  # refused: the form says why
        return _template_page(request, form, submission, status=form.refused_status)
    job, created = submitted
    if created:
        messages.success(request, f"Submitted {job.name} from the template {template.name}.")
    else:
        messages.info(request, "This form was sent before: here is the job it submitted.")
    return redirect("jobs:detail", job_id=job.pk)


def _template_page(
    request: HttpRequest,
    form: TemplateRunForm,
    submission: str,
    *,
    status: int = 200,
    attach: AttachFilesForm | None = None,
) -> HttpResponse:
    template = form.template
    names = [f.name for f in form.template_files]
    context = {
        "form": form,
        "template": template,
        "submission": submission,
        "template_files": form.template_files,
        "missing_data": template.missing_data(names),
        "may_change": files.may_change(request.user, template),
        "attach": attach or AttachFilesForm(),
    }
    return render(request, "jobtemplates/template_run.html", context, status=status)


def _attach_page(request: HttpRequest, template: JobTemplate, attach: AttachFilesForm, *, status: int) -> HttpResponse:
    form = TemplateRunForm(template=template, user=request.user)
    return _template_page(request, form, uuid.uuid4().hex, status=status, attach=attach)


def upload_refused(request: HttpRequest, template_id: int, message: str, *, status: int) -> HttpResponse:
    """The template's page, saying why the middleware refused a body unread."""
    template = template_for(request.user, template_id)
    attach = AttachFilesForm()
    attach.errors["data"] = attach.error_class([message])
    return _attach_page(request, template, attach, status=status)


def _changing(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view, given the template, for a caller who may change it; a 403 for one who may only see it."""

    @functools.wraps(view)
    def checked(request: SignedInRequest, template_id: int, **kwargs: str) -> HttpResponse:
        template = template_for(request.user, template_id)
        if files.may_change(request.user, template):
            return view(request, template, **kwargs)
        who = "the operators" if template.team_id is None else f"the team {template.team.slug if template.team else ''}"
        text = f"Only {who} may change the template {template.name}."
        return HttpResponse(text, status=403, content_type="text/plain")

    return checked


@require_POST
@login_required
@_changing
def attach_files(request: SignedInRequest, template: JobTemplate) -> HttpResponse:
    attach = AttachFilesForm(request.POST, request.FILES)
    if why := refused_upload(request):
        attach.is_valid()
        attach.add_error("data", f"The upload is too large: {why}.")
        return _attach_page(request, template, attach, status=413)
    status = 400
    if attach.is_valid():
        try:
            named = files.named(attach.cleaned_data["data"], unnamed=unnamed_files(request))
            kept = files.attach(template, named, by=request.user, now=timezone.now())
        except files.FilesRefused as exc:
            for message in exc.messages:
                attach.add_error("data", message)
        except OverQuota as exc:
            attach.add_error("data", exc.explanation())
            status = 413
        else:
            messages.success(request, f"Attached {', '.join(f.name for f in kept)} to the template {template.name}.")
            return redirect("jobtemplates:run", template_id=template.pk)
    return _attach_page(request, template, attach, status=status)


@require_POST
@login_required
@_changing
def remove_file(request: SignedInRequest, template: JobTemplate, name: str) -> HttpResponse:
    if not files.remove(template, name, by=request.user, now=timezone.now()):
        raise Http404("The template has no such file.")
    messages.success(request, f"Removed {name} from the template {template.name}.")
    return redirect("jobtemplates:run", template_id=template.pk)


@require_POST
@login_required
@_changing
def delete_template(request: SignedInRequest, template: JobTemplate) -> HttpResponse:
    files.delete_template(template, by=request.user, now=timezone.now())
    messages.success(request, f"Deleted the template {template.name}.")
    return redirect("jobtemplates:list")


@require_POST
@login_required
def save_job_as_template(request: SignedInRequest, job_id: uuid.UUID) -> HttpResponse:
    job = job_for(request.user, job_id)
    form = SaveTemplateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not saved: the name " + " ".join(str(e) for e in form.errors.get("name", [])))
        return redirect("jobs:detail", job_id=job.pk)
    try:
        saved = save_as_template(job, user=request.user, name=form.cleaned_data["name"])
    except (CommandTooLong, OverQuota) as exc:
        why = exc.explanation() if isinstance(exc, OverQuota) else str(exc)
    except DataGone as exc:
        them = "it" if len(exc.names) == 1 else "them"
        why = f"{exc}. Save it again: the template then has none of its files; attach {them} there."
    except OSError as exc:  # the store failed reading or writing a data file (its path is not the user's business)
        why = f"the store failed keeping the job's data files ({exc.strerror or 'an error'}); try again."
    else:
        why = ""
    if why:
        messages.error(request, f"Not saved: {why}")
        return redirect("jobs:detail", job_id=job.pk)
    template = saved.template
    files_word = "data file" if len(saved.files) == 1 else "data files"
    kept = f", with its {files_word} {', '.join(saved.files)}" if saved.files else ""
    messages.success(request, f"Saved {job.name} as the template {template.name} of the team {job.team.slug}{kept}.")
    if saved.files_deleted:
        messages.warning(request, "The job's data files were deleted by retention: attach them below.")
    return redirect("jobtemplates:run", template_id=template.pk)  # which warns of a /data/ file it lacks

"""What a schedule's run submits, checked by the same forms as the API's submissions, as its runner: a schedule
submits nothing its runner could not submit by hand that moment."""

from datetime import datetime

from django.contrib.auth.models import User

from core.refusals import Refused
from jobs.models import Job, JobArray
from jobs.submit.arrays import ArrayRequest
from jobs.submit.forms import ArrayForm, JobForm
from jobs.submit.service import submit
from jobtemplates.forms import TemplateRunForm
from jobtemplates.models import JobTemplate
from schedules.models import Schedule
from teams.access import teams_of
from teams.models import Team

ARRAY_FIELDS = ("indices", "max_running", "stop_after_failures")
# A schedule's job sends no files (a template's stored files it names); `reuse` is the resubmit form's.
NO_FILES = ("data", "reuse")

Errors = dict[str, list[str]]
RunForm = JobForm | TemplateRunForm


def problems(*, team: Team, user: User, template: JobTemplate | None, job: dict | None) -> Errors:
    """Why a run could not be submitted now, by field; {} when it could. The budget is checked by each run alone."""
    errors, _form = _checked(team=team, user=user, template=template, job=job)
    return errors


def submit_run(schedule: Schedule, *, planned_at: datetime) -> Job | JobArray:
    """Raises core.refusals.Refused (or a submission's refusal, which derives from it) with the reason."""
    if schedule.template_id is None and schedule.job is None:
        raise Refused("Its template was deleted: the schedule has nothing to submit.")
    user = schedule.runs_as
    errors, form = _checked(team=schedule.team, user=user, template=schedule.template, job=schedule.job)
    if errors or form is None:
        raise Refused(reason_of(errors))
    made, _created = submit(form.declaration(), user=user, array=_array_request(form))
    return made


def reason_of(errors: Errors) -> str:
    return " ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items())


def _array_request(form: RunForm) -> ArrayRequest | None:
    if isinstance(form, TemplateRunForm):
        return form.array_request() if form.is_array else None
    if isinstance(form, ArrayForm) and form.cleaned_data["indices"]:
        return form.array_request()
    return None


def _checked(*, team: Team, user: User, template: JobTemplate | None, job: object) -> tuple[Errors, RunForm | None]:
    if (template is None) == (job is None):
        return {
            "template": ["Give a template or a job to run, not both." if template else "Give a template or a job."]
        }, None
    if not user.is_active:
        return {"template" if template else "job": [f"Its runner {user.get_username()}'s account is disabled."]}, None
    return _template_form(team, user, template) if template is not None else _job_form(team, user, job)


def _not_a_member(team: Team, user: User) -> str:
    return f"Its runner {user.get_username()} is no longer a member of the team {team.slug}."


def _template_form(team: Team, user: User, template: JobTemplate) -> tuple[Errors, RunForm | None]:
    if template.team_id not in (None, team.pk):
        return {"template": [f"The template {template.name} is not one of the team {team.slug}'s."]}, None
    if missing := [p for p in template.parameters if p not in template.defaults]:
        names = ", ".join(missing)
        return {
            "template": [f"The template's parameters {names} have no default: a schedule runs it with its defaults."]
        }, None
    if not teams_of(user).filter(pk=team.pk).exists():
        return {"template": [_not_a_member(team, user)]}, None
    unbound = TemplateRunForm(template=template, user=user)
    data = {name: field.initial for name, field in unbound.fields.items() if field.initial is not None}
    if template.team_id is None:  # an operators' template runs for the schedule's team
        data["team"] = team.slug
    form = TemplateRunForm(data, template=template, user=user)
    if form.is_valid() and form.job_form is not None:
        return {}, form
    return {"template": [_message(field, error) for field, errors in form.errors.items() for error in errors]}, None


def _job_form(team: Team, user: User, job: object) -> tuple[Errors, RunForm | None]:
    if not isinstance(job, dict):
        return {"job": ["Must be a JSON object of a job's fields, as POST /api/v1/jobs/ takes them."]}, None
    form_class = ArrayForm if any(job.get(f) not in (None, "") for f in ARRAY_FIELDS) else JobForm
    errors: Errors = {}
    for name in job:
        if name in NO_FILES:
            errors[f"job.{name}"] = ["A schedule's job sends no files: attach them to a template and schedule it."]
        elif name not in form_class.base_fields:
            errors[f"job.{name}"] = ["Not a field of a job."]
    if job.get("team") not in (None, "", team.slug):
        errors["job.team"] = [f"A schedule of the team {team.slug} runs its jobs for that team."]
    if errors:
        return errors, None
    form = form_class({**job, "team": team.slug}, user=user)
    if team.slug not in form.teams:  # before is_valid: the form would say only that the choice is not valid
        return {"job": [_not_a_member(team, user)]}, None
    if form.is_valid():
        return {}, form
    image = job.get("image")
    for field, messages in form.errors.items():
        said = [str(m) for m in messages]
        if field == "image" and isinstance(image, str) and image and image not in form.images:
            said = [f"The image {image} is not registered (any more)."]
        errors["job" if field == "__all__" else f"job.{field}"] = said
    return errors, None


def _message(field: str, error: object) -> str:
    return str(error) if field == "__all__" else f"{field}: {error}"

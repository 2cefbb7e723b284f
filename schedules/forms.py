"""The page's form for a schedule, checked by the API's own serializer (ScheduleRequest), so the browser and
the API refuse the same things in the same words."""

import json
from typing import Any

from django import forms
from django.contrib.auth.models import User

from jobs.submit.forms import ArrayForm
from jobtemplates.access import visible_templates
from schedules.models import STARTING_DEADLINE_MAX_S, Concurrency, Schedule
from schedules.serializers import ScheduleRequest
from teams.access import teams_of

# The submit form's fields a schedule's job does not take (its team is the schedule's; no files).
NOT_SHOWN = ("team", "data", "reuse")
JOB_PREFIX = "job"


class ScheduleForm(forms.Form):
    name = forms.CharField(max_length=200)
    cron = forms.CharField(
        max_length=200,
        label="When",
        help_text='Five fields, e.g. "0 1 * * *", or @hourly, @daily, @nightly, @weekly, @monthly, @yearly.',
    )
    team = forms.ChoiceField(required=False, help_text="Needed when you are in more than one team.")
    time_zone = forms.CharField(required=False, max_length=64, help_text="An IANA zone; empty: the team's.")
    concurrency = forms.ChoiceField(
        required=False,
        choices=Concurrency.choices,
        initial=Concurrency.ALLOW,
        label="While the last run is going",
        help_text="allow: submit another; forbid: skip this one; replace: cancel the last and submit this one.",
    )
    starting_deadline_s = forms.CharField(
        required=False,
        max_length=20,
        label="Starting deadline (s)",
        widget=forms.NumberInput(attrs={"min": 0, "max": STARTING_DEADLINE_MAX_S}),
        help_text="A run later than this many seconds is recorded missed; empty: a late run is still submitted.",
    )
    runs = forms.ChoiceField(
        required=False,
        label="Each run submits",
        choices=[("job", "the job below"), ("template", "a template")],
        initial="job",
        widget=forms.RadioSelect,
    )
    template = forms.TypedChoiceField(
        coerce=int, required=False, help_text="Each run submits it with its own values and defaults."
    )

    def __init__(self, *args: Any, user: User, schedule: Schedule | None = None, **kwargs: Any) -> None:
        if schedule is not None and not args and "initial" not in kwargs:
            kwargs["initial"] = _initial(schedule)
        super().__init__(*args, **kwargs)
        self.user, self.schedule = user, schedule
        templates = visible_templates(user).select_related("team")
        self.fields["template"].choices = [("", "—")] + [  # type: ignore[attr-defined]
            (t.pk, f"{t.name} ({t.team.slug if t.team else 'operators'})") for t in templates
        ]
        self.fields["team"].choices = [("", "—")] + [(t.slug, t.slug) for t in teams_of(user)]  # type: ignore[attr-defined]
        if schedule is not None:  # a schedule's team cannot change
            del self.fields["team"]
        # Never validated on its own: its errors are the serializer's at `job.<field>`.
        self.job_form = ArrayForm(user=user, prefix=JOB_PREFIX, indices_required=False)
        stored = _as_text(schedule.job) if schedule is not None and schedule.job else None
        self.job_shown = self._shown_job(stored) if self.is_bound and stored is not None else None
        self.job_given = self._job_given()
        self.job_form.initial = _as_text(self.job_given) if self.is_bound else (stored or {})
        self.job_form.cleaned_data = {}  # so add_error works on the unbound form
        self.validated: dict[str, Any] = {}

    def job_fields(self) -> list[forms.BoundField]:
        return [self.job_form[name] for name in self.job_form.fields if name not in NOT_SHOWN]

    def _job_given(self) -> dict[str, Any]:
        """Those left empty left out: the API's defaults then apply."""
        if not self.is_bound:
            return {}
        form = self.job_form
        given = {}
        for name, field in form.fields.items():
            if name in NOT_SHOWN:
                continue
            value = field.widget.value_from_datadict(self.data, self.files, form.add_prefix(name))
            if value not in (None, "", []):
                given[name] = value
        return given

    def clean(self) -> dict[str, Any]:
        """The API's checks, its errors by field; the job is checked too when another field is wrong."""
        cleaned = super().clean() or {}
        refused = set(self.errors)  # the form said why: the serializer would say it a second time
        data = {key: value for key, value in cleaned.items() if key not in ("runs", "template", "starting_deadline_s")}
        data = {key: value for key, value in data.items() if value not in ("", None)}
        data["starting_deadline_s"] = cleaned.get("starting_deadline_s") or None
        if cleaned.get("runs") == "template" or (not cleaned.get("runs") and cleaned.get("template")):
            if cleaned.get("template") in ("", None):
                if "template" not in refused:
                    self.add_error("template", "Choose the template each run submits.")
                # Its "give exactly one of template and job" would say it again, above the form.
                refused |= {"template", "non_field_errors"}
            else:
                data["template"] = cleaned["template"]
        elif self.schedule is None or self.job_shown != _boxes(self.job_given):
            # A job left as shown is not sent: only a change of what it runs makes the editor its runner.
            data["job"] = self.job_given
        context: dict[str, Any] = {"user": self.user, "schedule": self.schedule}
        given = ScheduleRequest(data=data, partial=self.schedule is not None, context=context)
        if given.is_valid():
            self.validated = dict(given.validated_data)
            return cleaned
        for field, messages in {**given.errors, **given.job_problems()}.items():
            if field in refused:
                continue
            for message in messages if isinstance(messages, list) else [messages]:
                self._said(field, str(message))
        if self.has_job_errors():
            self.add_error(None, "The job each run submits is not valid: its fields below say why.")
        return cleaned

    def _said(self, field: str, message: str) -> None:
        """`job.<name>` at the job's field, `job` above them."""
        name = field.removeprefix(f"{JOB_PREFIX}.")
        if field.startswith(f"{JOB_PREFIX}.") and name in self.job_form.fields and name not in NOT_SHOWN:
            self.job_form.add_error(name, message)
        elif field.startswith(JOB_PREFIX):
            self.job_form.add_error(None, message)
        else:
            self.add_error(field if field in self.fields else None, message)

    def _shown_job(self, stored: dict[str, Any]) -> dict[str, str]:
        """The boxes as the edit page showed them, read without a BoundField, which would keep this initial."""
        form = self.job_form
        form.initial = stored
        shown = {
            name: field.prepare_value(form.get_initial_for_field(field, name)) for name, field in form.fields.items()
        }
        return _boxes(_as_text(shown))

    def has_job_errors(self) -> bool:
        return bool(self.job_form.errors)


def _initial(schedule: Schedule) -> dict[str, Any]:
    return {
        "name": schedule.name, "cron": schedule.cron, "time_zone": schedule.time_zone,
        "concurrency": schedule.concurrency, "starting_deadline_s": schedule.starting_deadline_s,
        "runs": "template" if schedule.template_id else "job", "template": schedule.template_id,
    }  # fmt: skip


def _as_text(job: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for name, value in job.items():
        if isinstance(value, dict) or (name == "command" and isinstance(value, list)):
            shown[name] = json.dumps(value)
        elif isinstance(value, bool):
            shown[name] = "" if value else "false"
        elif isinstance(value, list) and name == "inputs_from":  # one a line
            shown[name] = "\n".join(str(v) for v in value)
        elif isinstance(value, list) and name != "outputs":  # the outputs' box takes a list, one a line
            shown[name] = ", ".join(str(v) for v in value)
        else:
            shown[name] = value
    return shown


def _boxes(job: dict[str, Any]) -> dict[str, str]:
    boxes = {}
    for name, value in job.items():
        text = "\n".join(str(v) for v in value) if isinstance(value, list) else str(value)
        text = text.replace("\r\n", "\n").strip()
        if name not in NOT_SHOWN and value is not None and text:
            boxes[name] = text
    return boxes

"""Running a template: parameters, request within its bounds and data files besides the template's, declared
through jobs.submit.forms.JobForm; attaching files to a template."""

import dataclasses
from typing import Any

from django import forms
from django.conf import settings

from core.bounds import column_bounds, narrow
from core.names import showable_name
from jobs.models import DEFAULT_RETRY_ON
from jobs.submit.arrays import ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.forms import ArrayForm, DurationField, MultipleFileField, SubmittingForm
from jobtemplates.models import MAX_VALUE_CHARS, BadCommand, JobTemplate, TemplateFile
from teams.access import AnyUser, teams_of

REQUEST_FIELDS = {
    "cpus": ("CPUs", 1),
    "memory_mb": ("Memory (MB)", 16),
    "gpus": ("GPUs", 0),
    "time_limit_s": ("Time limit (s)", 1),
}
# The run form's fields the template presets (its field of the same name; indices: array_indices), read as
# typed by jobs.submit.forms.ArrayForm. An empty array's indices run one job.
PRESET_FIELDS = ("indices", "max_running", "max_retries", "retry_on", "retry_memory_factor", "retry_delay_s")
# The run form's fields a template leaves to each run, as the job form has them (empty: the team's default queue).
POLICY_FIELDS = ("queue", "constraint", "preemptable")


def preset(template: JobTemplate, name: str) -> str:
    """As the run form's field shows it."""
    if name == "indices":
        return template.array_indices
    if name == "retry_on":
        return ", ".join(template.retry_on) if template.retry_on != list(DEFAULT_RETRY_ON) else ""
    value = getattr(template, name)
    return "" if value is None else str(value)


class SaveTemplateForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, validators=[showable_name])


class AttachFilesForm(forms.Form):
    """Prefixed, as the run form on the same page has a data field too."""

    prefix = "attach"

    # Named as a submission's data files (the same upload limits); the form's bound data is `self.data` all
    # the same, as for jobs.submit.forms.JobForm.
    data = MultipleFileField(  # type: ignore[assignment]
        allow_empty_file=True,
        label="Attach data files",
        help_text="Staged read-only at /data/<name> for every run; a file of a name the template has replaces it.",
    )


class TemplateRunForm(SubmittingForm):
    name = forms.CharField(max_length=200)

    def __init__(
        self, *args: Any, template: JobTemplate, user: AnyUser, unnamed: list[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.template, self.user, self.unnamed = template, user, unnamed or []
        self.job_form: ArrayForm | None = None
        self.template_files: list[TemplateFile] = list(template.files.select_related("blob"))
        self.fields["data"] = MultipleFileField(
            required=False,
            allow_empty_file=True,
            label="More data files",
            help_text="Staged at /data/<name> besides the template's files; one of a name it has replaces its file.",
        )
        self.fields["name"].initial = template.name
        if template.team is None:  # an operators' template runs for the member's team
            teams = [t.slug for t in teams_of(user)]
            self.fields["team"] = forms.ChoiceField(
                choices=[(slug, slug) for slug in teams], required=len(teams) > 1, initial=teams[0] if teams else None
            )
        for parameter in template.parameters:
            default = template.defaults.get(parameter)
            self.fields[f"param_{parameter}"] = forms.CharField(
                label=parameter,
                required=default is None,
                initial=default,
                max_length=MAX_VALUE_CHARS,
                strip=False,  # the value is the argument, spaces included
                widget=forms.Textarea(attrs={"rows": 1}),  # a value may hold lines
                help_text=f"Default: {default}" if default is not None else "Required.",
            )
        for field, (label, least) in REQUEST_FIELDS.items():
            most = getattr(template, f"{field}_max")
            bounds = column_bounds(JobTemplate, field, least=least)
            # A time limit reads as the job form's does (90m, 2h), within the template's bounds.
            kind = DurationField if field == "time_limit_s" else forms.IntegerField
            number = kind(label=label, **bounds, initial=getattr(template, field))
            if most is not None:
                narrow(number, most)
                number.widget.attrs["max"] = most
                number.help_text = f"At most {most}."
            self.fields[field] = number
        for name in PRESET_FIELDS:  # text here: ArrayForm reads and checks each, its error shown on this field
            like = ArrayForm.base_fields[name]
            self.fields[name] = forms.CharField(
                required=False, label=like.label, help_text=like.help_text, initial=preset(template, name),
                widget=forms.TextInput(attrs=like.widget.attrs),
            )  # fmt: skip
        policy = ArrayForm(user=user)  # its queue field offers the queues the user's teams may use
        for name in POLICY_FIELDS:
            self.fields[name] = policy.fields[name]

    def policy_fields(self) -> list[forms.BoundField]:
        return [self[f] for f in POLICY_FIELDS]

    def preset_fields(self) -> list[forms.BoundField]:
        return [self[f] for f in PRESET_FIELDS]

    def parameter_fields(self) -> list[forms.BoundField]:
        return [self[f"param_{p}"] for p in self.template.parameters]

    def request_fields(self) -> list[forms.BoundField]:
        return [self[f] for f in REQUEST_FIELDS]

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.errors or cleaned is None:
            return cleaned
        values = {}
        for parameter in self.template.parameters:
            # A browser sends a textarea's line breaks as CRLF: the value has the lines as typed.
            typed = (cleaned.get(f"param_{parameter}") or "").replace("\r\n", "\n")
            values[parameter] = typed or self.template.defaults.get(parameter, "")
        try:
            argv = self.template.argv(values)
        except BadCommand as exc:  # a template saved past the admin's check
            self.add_error(None, f"This template cannot run: {exc} Ask an operator to change it.")
            return cleaned
        data = {
            "team": self.template.team.slug if self.template.team else cleaned.get("team", ""),
            "name": cleaned["name"],
            "image": self.template.image.name,
            "command": argv,  # a list: JobForm splits nothing again
            "env": self.template.env,
            "outputs": self.template.output_patterns,
            **{field: cleaned[field] for field in REQUEST_FIELDS},
            **{field: cleaned[field] for field in PRESET_FIELDS},
            **{field: cleaned[field] for field in POLICY_FIELDS},
        }
        uploads = self.files.getlist("data") if self.files else []
        job_form = self.job_form = ArrayForm(
            data, {"data": uploads}, user=self.user, unnamed=self.unnamed, indices_required=False
        )
        if not job_form.is_valid():
            self._take_errors(job_form)
            return cleaned
        names = {f.name for f in self.template_files} | {name for name, _upload in job_form.staged}
        if len(names) > (most := settings.E31_UPLOAD_MAX_FILES):
            self.add_error("data", f"At most {most} data files in all: the template has {len(self.template_files)}.")
        return cleaned

    @property
    def is_array(self) -> bool:
        return self.job_form is not None and bool(self.job_form.cleaned_data["indices"])

    def array_request(self) -> ArrayRequest:
        assert self.job_form is not None, "submit a valid form"
        return self.job_form.array_request()

    def declaration(self) -> Declaration:
        """The run form's job, the template's files named (not copied), an upload of a name it has winning."""
        assert self.job_form is not None, "submit a valid form"
        return dataclasses.replace(self.job_form.declaration(), blobs=[(f.name, f.blob) for f in self.template_files])

    def _take_errors(self, job_form: ArrayForm) -> None:
        for field, errors in job_form.errors.items():
            for error in errors:
                if field in self.fields:
                    self.add_error(field, error)
                else:
                    self.add_error(None, error if field == "__all__" else f"{field}: {error}")

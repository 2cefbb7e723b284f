"""Running a template: parameters and request within its bounds, declared through jobs.forms.JobForm."""

from typing import Any

from django import forms
from django.core.validators import MaxValueValidator

from core.names import showable_name
from jobs.forms import JobForm
from jobs.models import Job
from jobtemplates.models import MAX_VALUE_CHARS, BadCommand, JobTemplate
from teams.access import AnyUser, teams_of

REQUEST_FIELDS = {
    "cpus": ("CPUs", 1),
    "memory_mb": ("Memory (MB)", 16),
    "gpus": ("GPUs", 0),
    "time_limit_s": ("Time limit (s)", 1),
}


class SaveTemplateForm(forms.Form):
    """The optional name a job is saved as a template under, refused when unshowable or too long."""

    name = forms.CharField(max_length=200, required=False, validators=[showable_name])


class TemplateRunForm(forms.Form):
    name = forms.CharField(max_length=200)

    def __init__(self, *args: Any, template: JobTemplate, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.template, self.user = template, user
        self.job_form: JobForm | None = None
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
            number = forms.IntegerField(label=label, min_value=least, initial=getattr(template, field))
            if most is not None:
                number.max_value = most
                number.validators.append(MaxValueValidator(most))
                number.widget.attrs["max"] = most
                number.help_text = f"At most {most}."
            self.fields[field] = number

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
        }
        job_form = self.job_form = JobForm(data, {}, user=self.user)
        if not job_form.is_valid():
            self._take_errors(job_form)
        return cleaned

    def submit(self, *, key: str) -> tuple[Job, bool] | None:
        """Submit through JobForm.submit; None when the team's budget refuses, the reason this form's error."""
        assert self.job_form is not None, "submit a valid form"
        submitted = self.job_form.submit(key=key)
        if submitted is None:
            self._take_errors(self.job_form)
        return submitted

    def _take_errors(self, job_form: JobForm) -> None:
        """JobForm's errors on this form's field of the same name, else on the whole."""
        for field, errors in job_form.errors.items():
            for error in errors:
                if field in self.fields:
                    self.add_error(field, error)
                else:
                    self.add_error(None, error if field == "__all__" else f"{field}: {error}")

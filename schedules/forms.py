"""The page's small form for a schedule of a template: its fields checked by the API's own serializer."""

from typing import Any

from django import forms
from django.contrib.auth.models import User

from jobtemplates.access import visible_templates
from schedules.serializers import ScheduleRequest
from teams.access import teams_of


class ScheduleForm(forms.Form):
    name = forms.CharField(max_length=200)
    cron = forms.CharField(
        max_length=200,
        label="When",
        help_text='Five fields, e.g. "0 1 * * *", or @hourly, @daily, @nightly, @weekly, @monthly, @yearly.',
    )
    template = forms.TypedChoiceField(coerce=int, help_text="Each run submits it with its own values and defaults.")
    team = forms.ChoiceField(required=False, help_text="Needed when you are in more than one team.")
    time_zone = forms.CharField(required=False, max_length=64, help_text="An IANA zone; empty: the team's.")

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        templates = visible_templates(user).select_related("team")
        self.fields["template"].choices = [("", "—")] + [  # type: ignore[attr-defined]
            (t.pk, f"{t.name} ({t.team.slug if t.team else 'operators'})") for t in templates
        ]
        self.fields["team"].choices = [("", "—")] + [(t.slug, t.slug) for t in teams_of(user)]  # type: ignore[attr-defined]
        self.validated: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        """The API's checks (team, cron, zone, the template as a run would submit it), its errors by field."""
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        data = {key: value for key, value in cleaned.items() if value not in ("", None)}
        given = ScheduleRequest(data=data, context={"user": self.user})
        if not given.is_valid():
            for field, messages in given.errors.items():
                target = field if field in self.fields else None
                for message in messages if isinstance(messages, list) else [messages]:
                    self.add_error(target, str(message))
        else:
            self.validated = dict(given.validated_data)
        return cleaned

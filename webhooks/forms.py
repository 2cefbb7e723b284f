from typing import Any

from django import forms

from teams.access import AnyUser, chosen_team, teams_of
from teams.models import Team
from webhooks.actions import clean_events, clean_url
from webhooks.models import Event


class WebhookForm(forms.Form):
    team = forms.ChoiceField(required=False, help_text="The team whose events it is sent.")
    url = forms.URLField(
        max_length=2000,
        assume_scheme="https",
        label="URL",
        help_text="An http(s) URL of a host the operator allows webhooks to reach.",
    )
    events = forms.MultipleChoiceField(choices=[(e, e) for e in Event.values], widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.teams = {t.slug: t for t in teams_of(user)}
        field = self.fields["team"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(slug, team.name) for slug, team in self.teams.items()]
        if len(self.teams) <= 1:
            field.widget = forms.HiddenInput()

    def clean_team(self) -> Team:
        return chosen_team(
            self.teams, self.cleaned_data.get("team"), none="You are not in any team.", several="Choose a team."
        )

    def clean_url(self) -> str:
        return clean_url(self.cleaned_data["url"])

    def clean_events(self) -> list[str]:
        return clean_events(self.cleaned_data["events"])

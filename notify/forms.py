from django import forms

from core.formats import outcome_label
from core.outcomes import Outcome


class PreferenceForm(forms.Form):
    email_on = forms.MultipleChoiceField(
        choices=[(o.value, outcome_label(o.value)) for o in Outcome],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Mail me when a job ends",
    )
    digest = forms.BooleanField(required=False, label="Morning digest (and the team's budget warnings)")
    digest_hour = forms.TypedChoiceField(
        choices=[(h, f"{h:02d}:00") for h in range(24)],
        coerce=int,
        label="Digest at",
        help_text="in your team's time zone",
    )

from django import forms

from core.names import showable_name


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, validators=[showable_name], help_text="What it is for, e.g. “nightly cron on build-3”."
    )

"""The drain and resume confirmation: why, in the operator's words, kept in the node's history."""

from typing import Any

from django import forms

from pool.models import REASON_MAX


class NodeActionForm(forms.Form):
    """A drain must say why (it shows on the panel and in the node's history); a resume may."""

    reason = forms.CharField(
        max_length=REASON_MAX,
        strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "off", "size": 60, "autofocus": True}),
        help_text="Shown on the operator panel beside the node, and in its history.",
    )

    def __init__(self, *args: Any, action: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["reason"]
        field.required = action == "drain"
        field.label = "Why drain it?" if action == "drain" else "Why resume it? (optional)"
        if action == "drain":
            field.error_messages["required"] = "Say why it is drained: others read it on the panel and in its history."

    def full_clean(self) -> None:
        """An error is read out with the field, as its help is."""
        super().full_clean()
        if self.errors.get("reason"):
            described = f"{self['reason'].auto_id}_helptext {self['reason'].auto_id}_error"
            self.fields["reason"].widget.attrs["aria-describedby"] = described

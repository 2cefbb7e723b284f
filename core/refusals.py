"""A submission refused, and the one place it becomes an answer: every refusal (over budget, over quota, a file
freed meanwhile, a queue closed) derives from `Refused`; `on_form` makes it a form's error, `as_api_error` the
API's, and a schedule's run records its explanation as its reason."""

from typing import Any

from django import forms
from rest_framework.exceptions import APIException


class Refused(Exception):
    """`status` is what the API and the forms answer with, `field` the form's field at fault (None: the whole)."""

    status: int = 400
    field: str | None = None

    def explanation(self) -> str:
        return str(self)

    def as_dict(self) -> dict[str, Any]:
        """The API's body (docs/api.md, "Errors"): a field's error by its field, else `detail`."""
        if self.status == 400 and self.field:
            return {self.field: [self.explanation()]}
        return {"detail": self.explanation()}


def on_form(form: forms.Form, refused: Refused) -> int:
    """The refusal as the form's error (on its field when the form has it); returns the page's status."""
    form.add_error(refused.field if refused.field in form.fields else None, refused.explanation())
    return refused.status


def as_api_error(refused: Refused) -> APIException:
    answer = APIException(refused.as_dict())
    answer.status_code = refused.status
    return answer

"""A submission refused, and the one place it becomes an answer.

Every refusal of a submission (a job, an array, a resubmit, a template's run, a schedule's run) is a
`Refused` or derives from it: over budget (402, accounting.budgets.OverBudget), over the store quota
(413, accounting.store_quotas.OverQuota), a named file freed meanwhile (409, jobs.storage.blobs.BlobGone), a
queue closed to the team (400, jobs.submit.again.QueueClosed), a schedule's run that cannot be submitted
(400). Each says its status, the form's field at fault and its words; `on_form` makes it a form's
error, `as_api_error` the API's answer (e31site.api.exception_handler raises nothing else for it), and
a schedule's run records `words()` as its reason."""

from typing import Any

from django import forms
from rest_framework.exceptions import APIException


class Refused(Exception):
    """A submission refused: `status` is what the API and the forms answer with, `field` the form's field
    at fault (None: the whole request)."""

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
    """The refusal as the form's error (on its field when the form has it, else on the whole form); returns
    the status its page answers with."""
    form.add_error(refused.field if refused.field in form.fields else None, refused.explanation())
    return refused.status


def as_api_error(refused: Refused) -> APIException:
    """The refusal as the API answers it: its status, and its body as_dict says."""
    answer = APIException(refused.as_dict())
    answer.status_code = refused.status
    return answer

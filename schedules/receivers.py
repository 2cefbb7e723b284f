"""What schedules hear of the apps below them: a template's changes reach the schedules that run it."""

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from jobtemplates.models import JobTemplate
from jobtemplates.signals import template_changed
from schedules.changes import reach_schedules


def on_template_changed(
    sender: object,
    *,
    template: JobTemplate,
    by: User | None,
    at: datetime,
    changes: dict[str, list[Any]],
    **kwargs: Any,
) -> None:
    reach_schedules(template, by=by, changes=changes, now=at)


def connect() -> None:
    template_changed.connect(on_template_changed, sender=JobTemplate, dispatch_uid="schedules.template_changed")

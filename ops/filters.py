"""/usage/'s filters: the job list's, read to the minute in the viewer's zone, and when the jobs ended."""

from typing import Any

from django import forms

from core.filters import when_filter
from jobs.api.filters import JobPageFilter

# Each window's start and end: an end at or before its start is an error, not an empty page.
WINDOWS = [("since", "until"), ("ended_since", "ended_until")]


class UsageForm(forms.Form):
    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for start, end in WINDOWS:
            if data.get(start) and data.get(end) and data[end] <= data[start]:
                self.add_error(end, f"Enter a moment after the one in “{self.fields[start].label}”.")
        return data


class UsageFilter(JobPageFilter):
    """The job list's filters, and the jobs ended in a window, as the morning review sums them."""

    ended_since = when_filter(
        "released_at", "gte", "Ended from", "Released at or after: an ISO 8601 date or date-time."
    )
    ended_until = when_filter("released_at", "lt", "Ended before", "Released before: an ISO 8601 date or date-time.")

    moments = tuple(name for window in WINDOWS for name in window)

    class Meta(JobPageFilter.Meta):
        form = UsageForm

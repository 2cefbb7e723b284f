"""The filters of the records list (GET /api/v1/accounting/records/); a bad value answers 400."""

import django_filters

from accounting.models import Record
from core.filters import SlugFilter, when_filter
from core.outcomes import Outcome


class RecordFilter(django_filters.FilterSet):
    team = SlugFilter(field_name="team__slug", max_length=50, help_text="A team's slug.")
    node = SlugFilter(max_length=100, help_text="The name of the node that held the job.")
    outcome = django_filters.ChoiceFilter(choices=Outcome.choices, help_text="How the attempt ended.")
    user = django_filters.CharFilter(
        field_name="job__submitted_by__username", max_length=150, help_text="The username of who submitted the job."
    )
    job = django_filters.UUIDFilter(field_name="job_id", help_text="A job's id.")
    since = when_filter("released_at", "gte", "Released from", "Released at or after: an ISO 8601 date or date-time.")
    until = when_filter("released_at", "lt", "Released before", "Released before: an ISO 8601 date or date-time.")

    class Meta:
        model = Record
        fields: list[str] = []  # every filter is declared above

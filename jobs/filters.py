"""The filters of the job lists: one FilterSet for the API and the browser page, so both take the
same values and refuse the same bad ones (400, the field named)."""

import django_filters
from django import forms
from django.db.models import Q
from drf_spectacular.utils import extend_schema_field

from jobs.models import Job, Outcome, Stage

# The page's stage filter as a person thinks of it: a job being held, run or collected is "running".
STAGE_GROUPS = {
    "waiting": [Stage.SUBMIT],
    "running": [Stage.RENT, Stage.RUN, Stage.OUTPUT],
    "released": [Stage.RELEASE],
}


class SlugFilter(django_filters.CharFilter):
    """An exact slug (a team's, an image's, a node's name): anything else is a bad value."""

    field_class = forms.SlugField


def when_filter(field_name: str, lookup_expr: str, label: str, help_text: str) -> django_filters.IsoDateTimeFilter:
    """An ISO 8601 date or date-time (a naive one is in the site's time zone). OpenAPI says string:
    `format: date-time` would refuse the dates."""
    when = django_filters.IsoDateTimeFilter(
        field_name=field_name, lookup_expr=lookup_expr, label=label, help_text=help_text
    )
    return extend_schema_field({"type": "string", "description": help_text})(when)


class JobFilter(django_filters.FilterSet):
    stage = django_filters.ChoiceFilter(choices=Stage.choices, help_text="The job's step.")
    outcome = django_filters.ChoiceFilter(choices=Outcome.choices, help_text="How a released job ended.")
    team = SlugFilter(field_name="team__slug", max_length=50, label="Team", help_text="A team's slug.")
    user = django_filters.CharFilter(
        field_name="submitted_by__username", max_length=150, label="Submitted by", help_text="A username."
    )
    image = SlugFilter(field_name="image__name", max_length=64, label="Image", help_text="A runtime image's name.")
    since = when_filter(
        "submitted_at", "gte", "Submitted from", "Submitted at or after: an ISO 8601 date or date-time."
    )
    until = when_filter("submitted_at", "lt", "Submitted before", "Submitted before: an ISO 8601 date or date-time.")
    q = django_filters.CharFilter(
        method="search",
        max_length=200,
        label="Search",
        help_text="Words each found in the job's name or command (any case).",
    )

    class Meta:
        model = Job
        fields = []  # every filter is declared above

    def search(self, queryset, name, value: str):
        # The command is searched in its JSON text (quoted arguments, commas between): word by word,
        # so "train.py --epochs" finds ["python3", "train.py", "--epochs", "5"].
        for word in value.split():
            queryset = queryset.filter(Q(name__icontains=word) | Q(command__icontains=word))
        return queryset


class JobPageFilter(JobFilter):
    """The browser list's filters: the API's, and the stage groups of STAGE_GROUPS beside the stages."""

    stage = django_filters.ChoiceFilter(
        choices=[(group, group) for group in STAGE_GROUPS] + Stage.choices, method="filter_stage"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("since", "until"):  # a browser offers a date picker
            self.form.fields[name].widget = forms.DateInput(attrs={"type": "date"})

    def filter_stage(self, queryset, name, value: str):
        return queryset.filter(stage__in=STAGE_GROUPS.get(value, [value]))

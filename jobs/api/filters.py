"""The job lists' filters: one FilterSet for the API and the page, so both refuse the same bad values."""

from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.filters import MomentInput, SlugFilter, when_filter
from jobs.models import HELD_STAGES, Job, Outcome, Stage

# The page's "not succeeded": every outcome but success, as the outcome filter's values.
NOT_SUCCEEDED = [outcome for outcome in Outcome.values if outcome != Outcome.SUCCEEDED]

# The page's stage filter as a person thinks of it: a job being held, run or collected is "running".
STAGE_GROUPS = {
    "waiting": [Stage.SUBMIT],
    "running": list(HELD_STAGES),
    "released": [Stage.RELEASE],
}


class JobFilter(django_filters.FilterSet):
    stage = django_filters.ChoiceFilter(choices=Stage.choices, help_text="The job's step.")
    # Several outcomes are any of them (`?outcome=failed&outcome=timed_out`); no join, so no DISTINCT.
    outcome = django_filters.MultipleChoiceFilter(
        choices=Outcome.choices,
        distinct=False,
        help_text="How a released job ended; repeat it for any of several.",
    )
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
        fields: list[str] = []  # every filter is declared above

    def search(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        # Word by word through the command's JSON text, where arguments are quoted apart.
        for word in value.split():
            queryset = queryset.filter(Q(name__icontains=word) | Q(command__icontains=word))
        return queryset


class JobPageFilter(JobFilter):
    """The browser list's filters: the API's, and the stage groups of STAGE_GROUPS beside the stages; its
    moments typed as a day and a time in the viewer's zone."""

    moments: tuple[str, ...] = ("since", "until")

    stage = django_filters.ChoiceFilter(
        choices=[(group, group) for group in STAGE_GROUPS] + Stage.choices, method="filter_stage"
    )

    # The list's sortable columns (a column's name sorts up, "-name" down); ties broken by the newest.
    sort = django_filters.OrderingFilter(
        fields=(
            ("name", "name"),
            ("submitted_at", "submitted"),
            ("released_at", "ended"),
            ("stage", "stage"),
            ("outcome", "outcome"),
            ("image__name", "image"),
            ("submitted_by__username", "user"),
            ("cpus", "cpus"),
        ),
        label="Sort by",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        said = f"A day and a time, in {timezone.get_current_timezone_name()}."
        for name in self.moments:  # a browser's own day-and-time picker
            self.form.fields[name].widget = MomentInput()
            self.form.fields[name].help_text = said
        # A box per outcome: a multiple select wants a modifier key to choose a second.
        outcome = self.form.fields["outcome"]
        outcome.widget = forms.CheckboxSelectMultiple(choices=outcome.choices)
        outcome.help_text = "Any of those ticked."

    def filter_queryset(self, queryset: QuerySet[Job]) -> QuerySet[Job]:
        queryset = super().filter_queryset(queryset)
        if self.form.cleaned_data.get("sort"):
            queryset = queryset.order_by(*queryset.query.order_by, "-submitted_at", "-id")
        return queryset

    def filter_stage(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        return queryset.filter(stage__in=STAGE_GROUPS.get(value, [value]))

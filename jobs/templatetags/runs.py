"""The strip of a job name's last runs: `{% run_strip job %}`, or `{% run_strip job strips %}` with the strips a
page of many jobs read at once (jobs.web.runs.strips)."""

import uuid
from collections.abc import Iterator
from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from accounting.rates import currency
from core import formats
from jobs.models import Job
from jobs.web import runs

register = template.Library()

# A review's fifty strips are 1,500 cells: each cell's words are made here once, not by template filters
# (a reverse(), two dates and two costs a cell were most of the review's time).
CELL = '<li><a class="run outcome-{}{}" href="{}"{}{} title="{}" aria-label="{}"></a></li>'
ANY_ID = uuid.UUID(int=0)
CURRENT, NO_TAB_STOP, NOTHING = SafeString(' aria-current="true"'), SafeString(' tabindex="-1"'), SafeString("")


@register.inclusion_tag("jobs/partials/run_strip.html")
def run_strip(
    job: Job, strips: dict[runs.Key, list[runs.Run]] | None = None, *, tab_stops: bool = True
) -> dict[str, Any]:
    """The strip of the job's name in its team, its own run marked; `tab_stops` False keeps a page of many
    strips from putting thirty stops per card in the keyboard's way (the runs stay links and in the page's text)."""
    key = (job.team_id, job.name)
    shown = strips[key] if strips is not None and key in strips else runs.strip_of(job)
    if [run.id for run in shown] == [job.pk]:
        shown = []  # the job's own run alone is no history
    cells = format_html_join("", CELL, _cells(shown, job.pk, tab_stops=tab_stops)) if shown else NOTHING
    return {"job": job, "runs": shown, "cells": cells}


def _cells(shown: list[runs.Run], current: uuid.UUID, *, tab_stops: bool) -> Iterator[tuple[str, ...]]:
    url = reverse("jobs:detail", args=[ANY_ID])  # once a strip: a run's page is this with its id
    code = currency()
    for run in shown:
        this = run.id == current
        label, ran, cost = run.outcome_label, formats.duration(run.run_time), formats.money(run.cost, code)
        when = f"ended {formats.moment(run.released_at)}{' (this run)' if this else ''}"
        yield (
            run.outcome,
            " current" if this else "",
            url.replace(str(ANY_ID), str(run.id)),
            CURRENT if this else NOTHING,
            NOTHING if tab_stops else NO_TAB_STOP,
            f"{label} · {ran} · {cost} · {when}",
            f"{label}, run time {ran}, cost {cost}, {when}",
        )

"""The strip of a job name's last runs (Airflow's grid): `{% run_strip job %}` on the job page, and
`{% run_strip job strips %}` on a page of many jobs, with the strips it read for them all at once
(jobs.runs.strips), so a page of cards stays at one query for all its strips."""

from typing import Any

from django import template

from jobs import runs
from jobs.models import Job

register = template.Library()


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
    return {"job": job, "runs": shown, "length": runs.STRIP_LENGTH, "tab_stops": tab_stops}

"""The job page's metrics section, a screen of this app that the jobs app's page includes by its tag."""

from typing import Any

from django import template

from jobs.models import Job, OutputFile
from jobs.web.previews import METRIC_RUNS, metric_charts, metrics_of

register = template.Library()


@register.inclusion_tag("jobs/partials/job_metrics.html")
def job_metrics(job: Job, outputs: list[OutputFile]) -> dict[str, Any]:
    """A released job's metrics.json, each number charted over its team's runs of the same name."""
    if not job.is_released or (metrics := metrics_of(job, outputs)) is None:
        return {}
    return {"job": job, "metrics": metrics, "charts": metric_charts(job, metrics), "metric_runs": METRIC_RUNS}

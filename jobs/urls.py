from django.urls import path, register_converter
from django.urls.converters import PathConverter

from jobs.api.jobs import JobViewSet
from jobs.web import array_page, job_page, views


class OutputPath(PathConverter):
    """An output's path, newlines included: Django's `path` converter stops at one, which older outputs may hold."""

    regex = r"[\s\S]+"


register_converter(OutputPath, "output_path")

# Outside the "jobs" namespace and the router: an output's path has no trailing slash.
output_file = JobViewSet.as_view({"get": "output_file"})
api_urlpatterns = [path("api/v1/jobs/<uuid:pk>/outputs/<output_path:path>", output_file, name="job-output-file")]

app_name = "jobs"
urlpatterns = [
    path("jobs/", views.job_list, name="list"),
    path("jobs/new/", views.job_new, name="new"),
    path("jobs/estimate/", views.estimate_partial, name="estimate"),
    path("jobs/<uuid:job_id>/resubmit/", views.resubmit, name="resubmit"),
    path("jobs/<uuid:job_id>/", job_page.job_detail, name="detail"),
    path("jobs/<uuid:job_id>/live/", job_page.job_live, name="live"),
    path("jobs/<uuid:job_id>/cancel/", job_page.job_cancel, name="cancel"),
    path("jobs/<uuid:job_id>/pin/", job_page.job_pin, name="pin"),
    path("jobs/<uuid:job_id>/log.txt", job_page.job_log, name="log"),
    path("jobs/<uuid:job_id>/log/lines/", job_page.log_lines, name="log_lines"),
    path("jobs/<uuid:job_id>/outputs/<output_path:path>", job_page.job_output, name="output"),
    path("jobs/<uuid:job_id>/outputs.zip", job_page.outputs_zip, name="outputs_zip"),
    path("jobs/<uuid:job_id>/preview/<output_path:path>", job_page.output_preview, name="preview"),
    path("jobs/<uuid:job_id>/image/<output_path:path>", job_page.output_image, name="image"),
    path("arrays/<uuid:array_id>/", array_page.array_detail, name="array"),
    path("arrays/<uuid:array_id>/cancel/", array_page.array_cancel, name="array_cancel"),
    path("arrays/<uuid:array_id>/resubmit/", array_page.array_resubmit, name="array_resubmit"),
]

from django.urls import path, register_converter

from jobs import pages, views


class OutputPath:
    """An output's path relative to /output, as its URL carries it, percent-decoded. Django's `path`
    converter stops at a newline (`.` in its pattern), which made a job's page fail to link an output
    whose name has one (collection refuses such names now; older jobs may still have them)."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(OutputPath, "output_path")

app_name = "jobs"
urlpatterns = [
    path("jobs/", views.job_list, name="list"),
    path("jobs/new/", views.job_new, name="new"),
    path("jobs/<uuid:job_id>/", views.job_detail, name="detail"),
    path("jobs/<uuid:job_id>/live/", views.job_live, name="live"),
    path("jobs/<uuid:job_id>/cancel/", views.job_cancel, name="cancel"),
    path("jobs/<uuid:job_id>/log.txt", views.job_log, name="log"),
    path("jobs/<uuid:job_id>/outputs/<output_path:path>", views.job_output, name="output"),
    path("jobs/<uuid:job_id>/outputs.zip", pages.outputs_zip, name="outputs_zip"),
    path("jobs/<uuid:job_id>/preview/<output_path:path>", pages.output_preview, name="preview"),
    path("jobs/<uuid:job_id>/image/<output_path:path>", pages.output_image, name="image"),
    path("jobs/<uuid:job_id>/log/lines/", pages.log_lines, name="log_lines"),
    path("jobs/<uuid:job_id>/resubmit/", pages.resubmit, name="resubmit"),
]

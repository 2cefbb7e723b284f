from django.urls import path, register_converter

from jobs import views


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
    path("", views.job_list, name="list"),
    path("jobs/new/", views.job_new, name="new"),
    path("jobs/<uuid:job_id>/", views.job_detail, name="detail"),
    path("jobs/<uuid:job_id>/live/", views.job_live, name="live"),
    path("jobs/<uuid:job_id>/cancel/", views.job_cancel, name="cancel"),
    path("jobs/<uuid:job_id>/log.txt", views.job_log, name="log"),
    path("jobs/<uuid:job_id>/outputs/<output_path:path>", views.job_output, name="output"),
]

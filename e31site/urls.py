from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from accounting import urls as accounting_urls
from accounting.api import RecordViewSet, StatementView, UsageView
from isolation import urls as isolation_urls
from jobs import urls as jobs_urls  # registers the output_path converter the API route below uses
from jobs.accounting_views import estimate_partial, job_pin
from jobs.api import JobViewSet
from jobs.metrics import metrics_view
from pool.api import NodeViewSet
from pool.views import UtilisationView, utilisation_page

router = DefaultRouter(trailing_slash=True)
router.include_format_suffixes = False  # output paths end in .json, .csv…: never a format
router.register("jobs", JobViewSet, basename="job")
router.register("pool/nodes", NodeViewSet, basename="node")
router.register("accounting/records", RecordViewSet, basename="record")

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/accounting/usage/", UsageView.as_view(), name="usage"),
    path("api/v1/accounting/statements/", StatementView.as_view(), name="statement-api"),
    path("api/v1/accounting/utilisation/", UtilisationView.as_view(), name="utilisation-api"),
    path("accounting/utilisation/", utilisation_page, name="utilisation"),
    path("jobs/estimate/", estimate_partial, name="job-estimate-partial"),
    path("jobs/<uuid:job_id>/pin/", job_pin, name="job-pin"),
    path("metrics", metrics_view, name="metrics"),
    path(
        "api/v1/jobs/<uuid:pk>/outputs/<output_path:path>",
        JobViewSet.as_view({"get": "output_file"}),
        name="job-output-file",
    ),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("", include(isolation_urls)),
    path("", include(accounting_urls)),
    path("", include(jobs_urls)),
]

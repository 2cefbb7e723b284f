from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from accounting.api import RecordViewSet, UsageView
from isolation import urls as isolation_urls
from jobs import urls as jobs_urls  # registers the output_path converter the API route below uses
from jobs.api import JobViewSet
from jobtemplates import urls as jobtemplates_urls
from ops import urls as ops_urls
from pool.api import NodeViewSet

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
    path(
        "api/v1/jobs/<uuid:pk>/outputs/<output_path:path>",
        JobViewSet.as_view({"get": "output_file"}),
        name="job-output-file",
    ),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("", include(isolation_urls)),
    path("", include(ops_urls)),
    path("", include(jobtemplates_urls)),
    path("", include(jobs_urls)),
]

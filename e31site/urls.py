from csp.constants import SELF
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from accounting import urls as accounting_urls
from accounting.api import RecordViewSet, StatementView
from dashboard import urls as dashboard_urls
from isolation import urls as isolation_urls
from jobs import urls as jobs_urls
from jobs.api.arrays import ArrayViewSet
from jobs.api.jobs import JobViewSet
from jobtemplates import urls as jobtemplates_urls
from notify import urls as notify_urls
from ops import urls as ops_urls
from ops.api import UsageView
from pool.api import MaintenanceWindowViewSet, NodeViewSet
from pool.views import UtilisationView, utilisation_page
from schedules import urls as schedules_urls
from teams import views as teams_views
from teams.api import TokenViewSet
from webhooks import urls as webhooks_urls

router = DefaultRouter(trailing_slash=True)
router.include_format_suffixes = False  # output paths end in .json, .csv…: never a format
router.register("jobs", JobViewSet, basename="job")
router.register("arrays", ArrayViewSet, basename="array")
router.register("pool/nodes", NodeViewSet, basename="node")
router.register("pool/windows", MaintenanceWindowViewSet, basename="maintenance-window")
router.register("accounting/records", RecordViewSet, basename="record")
router.register("tokens", TokenViewSet, basename="token")

# The operators' admin says whose it is, not "Django administration".
admin.site.site_header = "E31 Network administration"
admin.site.site_title = "E31 Network"
admin.site.index_title = "The pool, its teams and jobs"


@require_safe
@cache_control(public=True, max_age=86400)
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask /favicon.ico where a response names no icon (the admin, the API's JSON): the pages' icon,
    served with the other static files."""
    return redirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/accounting/usage/", UsageView.as_view(), name="usage"),
    path("api/v1/accounting/statements/", StatementView.as_view(), name="statement-api"),
    path("api/v1/accounting/utilisation/", UtilisationView.as_view(), name="utilisation-api"),
    path("accounting/utilisation/", utilisation_page, name="utilisation"),
    path("", include(jobs_urls.api_urlpatterns)),
    path("", include(schedules_urls.api_urlpatterns)),
    path("", include(notify_urls.api_urlpatterns)),
    path("", include(webhooks_urls.api_urlpatterns)),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its script as a file (no inline script); its icons are data: images.
    path(
        "api/docs/",
        csp_update({"img-src": [SELF, "data:"]})(SpectacularSwaggerSplitView.as_view(url_name="schema")),
        name="swagger-ui",
    ),
    path("account/", teams_views.account, name="account"),
    path("account/tokens/<int:token_id>/revoke/", teams_views.revoke_token, name="revoke-token"),
    path("", include(schedules_urls)),
    path("", include(notify_urls)),
    path("", include(webhooks_urls)),
    path("", include(isolation_urls)),
    path("", include(ops_urls)),
    path("", include(jobtemplates_urls)),
    path("", include(accounting_urls)),
    path("", include(dashboard_urls)),
    path("", include(jobs_urls)),
]

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render, resolve_url
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.deprecation import MiddlewareMixin

from core.database import unavailable
from jobs.storage.store import StoreUnavailable
from jobs.submit.uploads import BODY_REFUSED, declared_too_large, refused_body
from jobs.web.views import submission_refused
from jobtemplates.views import upload_refused
from teams.access import page_zone

log = logging.getLogger(__name__)

API_PREFIX = "/api/"

# The template pages that take data files (a run's, or files attached), refused as a submission is.
TEMPLATE_UPLOADS = {"jobtemplates:run", "jobtemplates:attach"}


def htmx_login_redirect(
    get_response: Callable[[HttpRequest], HttpResponseBase],
) -> Callable[[HttpRequest], HttpResponseBase]:
    """Send an expired session's htmx request to the login page whole; htmx would swap the form into a fragment."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        login = resolve_url(settings.LOGIN_URL)
        if getattr(request, "htmx", False) and response.status_code == 302 and response["Location"].startswith(login):
            response.status_code = 204
            response["HX-Redirect"] = response["Location"]
        return response

    return middleware


def team_time_zone(
    get_response: Callable[[HttpRequest], HttpResponseBase],
) -> Callable[[HttpRequest], HttpResponseBase]:
    """Pages (the admin's too) show and read moments in the viewer's team zone; the API keeps answering in UTC."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(API_PREFIX):
            return get_response(request)
        try:
            zone = page_zone(request) if request.user.is_authenticated else None
        except DatabaseError as error:
            if not unavailable(error):
                raise
            zone = None  # the view meets the database's absence too, and ServiceUnavailable answers 503
        with timezone.override(zone):
            return get_response(request)

    return middleware


def declared_upload_limit(
    get_response: Callable[[HttpRequest], HttpResponseBase],
) -> Callable[[HttpRequest], HttpResponseBase]:
    """A declared Content-Length over the limit is 413 unread, so no worker drains a slow client; the form is
    parsed before the CSRF check, so a body Django refuses is answered with the reason, not a CSRF failure."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST":
            return get_response(request)
        api = request.path_info in (reverse("job-list"), reverse("array-list"))
        page = request.path_info == reverse("jobs:new")
        template = _template_upload(request)
        if not (api or page or template is not None):
            return get_response(request)

        def refused(message: str, status: int) -> HttpResponseBase:
            if template is not None:
                return upload_refused(request, template, message, status=status)
            return submission_refused(request, message, status=status)

        if why := declared_too_large(request):
            message = f"The upload is too large: {why}."
            if api:
                return JsonResponse({"detail": message}, status=413)
            return refused(message, 413)
        if not api:
            try:
                request.POST  # noqa: B018 (parses the body, files included)
            except BODY_REFUSED as exc:
                return refused(refused_body(exc)[1], 400)
        return get_response(request)

    return middleware


def _template_upload(request: HttpRequest) -> int | None:
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return match.kwargs["template_id"] if match.view_name in TEMPLATE_UPLOADS else None


DATABASE_AWAY = "The database is unavailable; try again shortly."
DATABASE_AWAY_RETRY_S = 5
DATABASE_AWAY_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>Unavailable · E31</title></head>"
    f"<body><h1>Service unavailable</h1><p>{DATABASE_AWAY}</p></body></html>"
)
STORE_AWAY_RETRY_S = 60


class ServiceUnavailable(MiddlewareMixin):
    """503 with Retry-After, not a 500 that reads as a bug, while the database (any other database error stays
    a 500) or the file store is away. The database's page is plain HTML, not a template: rendering one would run
    the context processors, which read the database."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponseBase | None:
        if unavailable(exception):
            log.warning("%s %s: the database is unavailable: %s", request.method, request.path, exception)
            text, retry_after = DATABASE_AWAY, DATABASE_AWAY_RETRY_S
        elif isinstance(exception, StoreUnavailable):
            text = f"The file store is unavailable ({exception}); nothing was kept. Try again in a minute."
            retry_after = STORE_AWAY_RETRY_S
        else:
            return None
        response: HttpResponseBase
        if request.path_info.startswith(API_PREFIX):
            response = JsonResponse({"detail": text}, status=503)
        elif text == DATABASE_AWAY:
            response = HttpResponse(DATABASE_AWAY_PAGE, status=503)
        else:
            context = {"code": 503, "heading": "The file store is unavailable", "text": text}
            response = render(request, "error.html", context, status=503)
        response["Retry-After"] = str(retry_after)
        return response

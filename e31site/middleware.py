from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.shortcuts import resolve_url
from django.urls import reverse

from jobs.uploads import BODY_REFUSED, declared_too_large, refused_body
from jobs.views import submission_refused


def htmx_login_redirect(
    get_response: Callable[[HttpRequest], HttpResponseBase],
) -> Callable[[HttpRequest], HttpResponseBase]:
    """An htmx request whose session expired is sent to the login page as a whole page.

    Without this htmx follows the 302 itself and swaps the login form into the polled fragment.
    """

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        login = resolve_url(settings.LOGIN_URL)
        if getattr(request, "htmx", False) and response.status_code == 302 and response["Location"].startswith(login):
            response.status_code = 204
            response["HX-Redirect"] = response["Location"]
        return response

    return middleware


def declared_upload_limit(
    get_response: Callable[[HttpRequest], HttpResponseBase],
) -> Callable[[HttpRequest], HttpResponseBase]:
    """Submissions (the submit form, POST /api/v1/jobs/) refused for their size before the view runs.

    1. A declared Content-Length over what a submission can carry is answered 413 at once, unread:
       otherwise the parser would drain the whole body, and a sync web worker would wait for a slow
       client until its timeout. (The server closes the connection, whose body was never read:
       gunicorn's sync workers close every one, its threaded ones when the rest cannot be drained.)
    2. The submit form's body is parsed here, before the CSRF check reads it: when Django's parser
       refuses it (too many files, fields or field bytes), the CSRF token in it is lost too, so the
       page is answered with the form and the reason (400) instead of a CSRF failure. The API
       answers those in its exception handler (e31site.api), as field errors.
    """

    def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST":
            return get_response(request)
        api, page = request.path_info == reverse("job-list"), request.path_info == reverse("jobs:new")
        if not (api or page):
            return get_response(request)
        if why := declared_too_large(request):
            message = f"The upload is too large: {why}."
            if api:
                return JsonResponse({"detail": message}, status=413)
            return submission_refused(request, message, status=413)
        if page:
            try:
                request.POST  # noqa: B018 (parses the body, files included)
            except BODY_REFUSED as exc:
                return submission_refused(request, refused_body(exc)[1], status=400)
        return get_response(request)

    return middleware

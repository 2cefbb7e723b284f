from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import resolve_url


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

"""A store that fails while a request reads or writes it (jobs.store.StoreUnavailable) is a 503 saying so,
on a page or in the API's shape, not a 500: nothing was kept, and the same request may succeed later."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render

from jobs.store import StoreUnavailable

RETRY_AFTER_S = 60


class StoreUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, StoreUnavailable):
            return None
        text = f"The file store is unavailable ({exc}); nothing was kept. Try again in a minute."
        if request.path_info.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": text}, status=503)
        else:
            context = {"code": 503, "heading": "The file store is unavailable", "text": text}
            response = render(request, "error.html", context, status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response

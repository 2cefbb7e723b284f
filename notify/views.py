"""The unsubscribe link of every mail: it works signed out; a GET only asks (a mail scanner follows
links), the POST (the page's button, or a mail client's one-click List-Unsubscribe-Post) stops the mail."""

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from notify.links import user_of_token
from notify.preferences import unsubscribe as stop_mail


@csrf_exempt  # the token is the proof: a mail client's one-click POST has no CSRF cookie (RFC 8058)
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    user_id = user_of_token(token)
    if user_id is None:
        raise Http404("This link is not one of ours.")
    if request.method == "POST":
        stop_mail(user_id)
        return render(request, "notify/unsubscribe.html", {"done": True})
    return render(request, "notify/unsubscribe.html", {"done": False})

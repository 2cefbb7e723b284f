"""A person's notifications page, and the unsubscribe link of every mail: it works signed out; a GET only
asks (a mail scanner follows links), the POST (the page's button, or a mail client's one-click
List-Unsubscribe-Post) stops the mail."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from notify.forms import PreferenceForm
from notify.links import user_of_token
from notify.preferences import mail_is_on, preference_of, set_preferences
from notify.preferences import unsubscribe as stop_mail
from teams.access import SignedInRequest


@login_required
@require_http_methods(["GET", "POST"])
def notifications(request: SignedInRequest) -> HttpResponse:
    """GET: the person's choices; POST: saved, then the page again (a redirect: a reload does not post twice)."""
    found = preference_of(request.user)
    if request.method == "POST":
        form = PreferenceForm(request.POST)
        if form.is_valid():
            set_preferences(request.user, **form.cleaned_data)
            return redirect(f"{request.path}?saved=1")
    else:
        form = PreferenceForm(
            initial={"email_on": found.email_on, "digest": found.digest, "digest_hour": found.digest_hour}
        )
    context = {"form": form, "mail_on": mail_is_on(), "email": request.user.email, "saved": "saved" in request.GET}
    return render(request, "notify/notifications.html", context)


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

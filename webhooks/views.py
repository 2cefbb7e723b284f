"""/account/webhooks/: the teams' webhooks, made (the secret shown once), deleted, and each one's delivery
log with a redeliver button; htmx swaps the parts."""

import uuid

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from teams.access import SignedInRequest
from webhooks.access import delivery_of, webhook_for, webhooks_for
from webhooks.actions import create_webhook
from webhooks.delivery import TooManyRedeliveries
from webhooks.delivery import redeliver as send_again
from webhooks.forms import WebhookForm
from webhooks.hosts import webhooks_are_on
from webhooks.models import Webhook

LOG_PAGE = 20


class WebhooksRequest(SignedInRequest):
    htmx: HtmxDetails


def _page(request: WebhooksRequest, *, status: int = 200, **context: object) -> HttpResponse:
    template = "webhooks/partials/webhooks.html" if request.htmx else "webhooks/webhooks.html"
    return render(
        request,
        template,
        {
            "webhooks": webhooks_for(request.user),
            "form": context.pop("form", None) or WebhookForm(user=request.user),
            "on": webhooks_are_on(),
            **context,
        },
        status=status,
    )


@login_required
@require_http_methods(["GET", "POST"])
def webhooks_page(request: WebhooksRequest) -> HttpResponse:
    if request.method == "POST" and webhooks_are_on():
        form = WebhookForm(request.POST, user=request.user)
        if form.is_valid():
            data = form.cleaned_data
            try:
                webhook, secret = create_webhook(
                    data["team"], url=data["url"], events=data["events"], user=request.user, now=timezone.now()
                )
            except ValidationError as exc:  # the team's cap
                form.add_error(None, exc)
            else:
                return _page(request, new_webhook=webhook, new_secret=secret)
        return _page(request, form=form, status=400)
    return _page(request)


@login_required
@require_POST
def delete_webhook(request: WebhooksRequest, webhook_id: int) -> HttpResponse:
    webhook_for(request.user, webhook_id).delete()
    return _page(request, deleted=True) if request.htmx else redirect("webhooks:page")


def _log(request: WebhooksRequest, webhook: Webhook, *, status: int = 200, **context: object) -> HttpResponse:
    page = Paginator(webhook.deliveries.all(), LOG_PAGE).get_page(request.GET.get("page"))
    if not request.htmx:
        return _page(request, log_of=webhook.pk, page=page, status=status, **context)
    return render(
        request, "webhooks/partials/deliveries.html", {"webhook": webhook, "page": page, **context}, status=status
    )


@login_required
@require_GET
def deliveries(request: WebhooksRequest, webhook_id: int) -> HttpResponse:
    return _log(request, webhook_for(request.user, webhook_id))


@login_required
@require_POST
def redeliver(request: WebhooksRequest, webhook_id: int, delivery_id: uuid.UUID) -> HttpResponse:
    webhook = webhook_for(request.user, webhook_id)
    try:
        again = send_again(delivery_of(webhook, delivery_id), now=timezone.now())
    except TooManyRedeliveries as exc:
        response = _log(request, webhook, status=429, throttled=str(exc))
        response["Retry-After"] = str(exc.wait_s)
        return response
    return _log(request, webhook, redelivered=again) if request.htmx else redirect("webhooks:page")

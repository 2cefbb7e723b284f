"""The account page: a person's API tokens, made (the key shown once), listed and revoked with htmx."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from teams.access import SignedInRequest
from teams.forms import TokenForm
from teams.tokens import issue_token, revocable_token, tokens_for


class AccountRequest(SignedInRequest):
    htmx: HtmxDetails


def _tokens(request: AccountRequest, **context: object) -> HttpResponse:
    template = "teams/partials/tokens.html" if request.htmx else "teams/account.html"
    mine = tokens_for(request.user).filter(user=request.user)
    return render(request, template, {"tokens": mine, "form": context.pop("form", TokenForm()), **context})


@login_required
@require_http_methods(["GET", "POST"])
def account(request: AccountRequest) -> HttpResponse:
    """POST: make a token, whose key this answer shows once."""
    if request.method == "POST":
        form = TokenForm(request.POST)
        if not form.is_valid():
            return _tokens(request, form=form)
        token, key = issue_token(request.user, name=form.cleaned_data["name"])
        return _tokens(request, new_token=token, new_key=key)
    return _tokens(request)


@login_required
@require_POST
def revoke_token(request: AccountRequest, token_id: int) -> HttpResponse:
    revocable_token(request.user, token_id).delete()
    if not request.htmx:
        return redirect("account")
    return _tokens(request, revoked=True)

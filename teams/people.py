"""Teams and people, as an operator scripts them (used by the management commands and tests)."""

from django.contrib.auth import get_user_model
from django.contrib.auth import models as auth_models
from django.db import transaction

from teams.access import zones_changed
from teams.models import Membership, Team
from teams.tokens import create_token


@transaction.atomic
def create_team(slug: str, *, name: str = "") -> tuple[Team, bool]:
    return Team.objects.get_or_create(slug=slug, defaults={"name": name or slug})


@transaction.atomic
def add_member(
    username: str, *, team: Team, password: str | None = None, operator: bool = False, email: str | None = None
) -> auth_models.User:
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    fields = []
    if email is not None and user.email != email:
        user.email = email  # where their mail goes (notify)
        fields.append("email")
    if password is not None:
        user.set_password(password)
        fields.append("password")
    elif created:
        user.set_unusable_password()  # not "": a new person cannot sign in until given a password
        fields.append("password")
    if operator and not user.is_staff:
        user.is_staff = True
        user.is_superuser = True
        fields += ["is_staff", "is_superuser"]
    if fields:
        user.save(update_fields=fields)
    if Membership.objects.get_or_create(team=team, user=user)[1]:
        zones_changed()  # their first team, and so their pages' zone, may be this one now
    return user


def token_for(user: auth_models.User) -> str:
    return create_token(user)

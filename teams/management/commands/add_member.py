from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_email

from teams.models import Team
from teams.people import add_member


class Command(BaseCommand):
    help = "Add a person to a team, creating the user when needed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", required=True)
        parser.add_argument("--password")
        parser.add_argument("--operator", action="store_true", help="make the user an operator (staff)")
        parser.add_argument("--email", help="the address their mail goes to (job endings, the digest)")

    def handle(
        self, *args: Any, username: str, team: str, password: str | None, operator: bool, email: str | None,
        **options: Any,
    ) -> None:  # fmt: skip
        try:
            get_user_model()._meta.get_field("username").clean(username, None)  # not blank, characters, length
        except ValidationError:
            raise CommandError(f"{username!r} is not a valid username (letters, digits and @.+-_)") from None
        if email is not None:
            try:
                validate_email(email)
            except ValidationError:
                raise CommandError(f"{email!r} is not an e-mail address") from None
        try:
            team_obj = Team.objects.get(slug=team)
        except Team.DoesNotExist:
            raise CommandError(f"no team {team!r}; create it with create_team") from None
        user = add_member(username, team=team_obj, password=password, operator=operator, email=email)
        role = "an operator" if user.is_staff else "a member"
        self.stdout.write(f"{user.username} is {role} of {team_obj.slug}")

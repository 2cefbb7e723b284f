from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.models import Team
from teams.people import create_team


class Command(BaseCommand):
    help = "Create a team (does nothing if it exists)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            Team._meta.get_field("slug").clean(slug, None)  # not blank, the characters and the length
        except ValidationError:
            raise CommandError(f"{slug!r} is not a valid slug (up to 50 letters, digits, - and _)") from None
        team, created = create_team(slug, name=name)
        self.stdout.write(f"{'created' if created else 'exists'}: team {team.slug}")

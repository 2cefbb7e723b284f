from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from teams.people import create_team


class Command(BaseCommand):
    help = "Create a team (does nothing if it exists)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args, slug, name, **options):
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(f"{slug!r} is not a valid slug (letters, digits, - and _)") from None
        team, created = create_team(slug, name=name)
        self.stdout.write(f"{'created' if created else 'exists'}: team {team.slug}")

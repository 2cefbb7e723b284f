from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from worker.runtime_images import RECIPES, build


class Command(BaseCommand):
    help = "Build the runtime images locally (offline) and register them; cached images are reused."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", default=list(RECIPES), help=f"some of: {', '.join(RECIPES)}")
        parser.add_argument("--force", action="store_true", help="rebuild even when the image exists")

    def handle(self, *args: Any, names: list[str], force: bool, **options: Any) -> None:
        unknown = set(names) - set(RECIPES)
        if unknown:
            raise CommandError(f"unknown images: {', '.join(sorted(unknown))}")
        for name in names:
            image, built = build(name, force=force)
            self.stdout.write(f"{image.name}: {image.reference} ({'built' if built else 'cached'})")

"""What a job's team and image require of it: isolation=strong, read at submit and again at run."""

from jobs.models import Isolation, RuntimeImage
from teams.models import Team


def strong_required_by(team: Team, image: RuntimeImage) -> str:
    """Who requires isolation=strong, in words ("the team t and the image i"); "" when neither does."""
    required_by = [
        f"the team {team.slug}" if team.requires_strong_isolation else "",
        f"the image {image.name}" if image.requires_strong_isolation else "",
    ]
    return " and ".join(part for part in required_by if part)


def isolation_of(asked: str, *, required_by: str) -> str:
    """The isolation a job runs with: strong when something requires it, else what it asked for."""
    return Isolation.STRONG if required_by else (asked or Isolation.STANDARD)

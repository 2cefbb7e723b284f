from typing import Any

from django import template
from django.utils import timezone

from pool.windows import UPCOMING, upcoming

register = template.Library()


@register.inclusion_tag("pool/partials/upcoming_windows.html")
def upcoming_windows() -> dict[str, Any]:
    """The maintenance windows under way or starting within UPCOMING, for the submit form and the review."""
    return {"windows": upcoming(now=timezone.now()), "within_days": UPCOMING.days}

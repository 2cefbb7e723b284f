"""A reason a job or array was given (`its dependency can never be met: job <id> ended failed`, `waits for array
<id> succeeds`) as a person reads it: each job or array it names by id said by its name, linked to its page.

The reasons are kept with ids (the API and the CLI read them, and a name is not unique); the pages put the names
in, `{{ job.reason|upstreams_named:job.team_id }}`, in one query per reason that names any."""

import re
import uuid

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from jobs.models import Job, JobArray

register = template.Library()

NAMED_BY_ID = re.compile(r"\b(job|array) ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")


def _names(text: str, team_id: int) -> dict[tuple[str, str], str]:
    """(kind, id) → name of each job and array of the team that `text` names by id."""
    found = NAMED_BY_ID.findall(text)
    if not found:
        return {}
    ids = {kind: [uuid.UUID(pk) for k, pk in found if k == kind] for kind in ("job", "array")}
    names: dict[tuple[str, str], str] = {}
    for kind, model in (("job", Job), ("array", JobArray)):
        if ids[kind]:
            rows = model.objects.filter(team_id=team_id, pk__in=ids[kind]).values_list("pk", "name")
            names.update({(kind, str(pk)): name for pk, name in rows})
    return names


@register.filter
def upstreams_named(text: str, team_id: int) -> SafeString:
    """`text`, escaped, each job or array of the team it names by id said by its name, linked to its page
    (one of another team, or gone, as "another job")."""
    text = text or ""
    names = _names(text, team_id)
    pieces: list[str] = []
    last = 0
    for found in NAMED_BY_ID.finditer(text):
        kind, pk = found.groups()
        pieces.append(conditional_escape(text[last : found.start()]))
        name = names.get((kind, pk))
        if name is None:
            pieces.append(f"another {kind}")
        else:
            page = reverse("jobs:detail" if kind == "job" else "jobs:array", args=[pk])
            pieces.append(format_html('{} <a href="{}">{}</a>', kind, page, name))
        last = found.end()
    pieces.append(conditional_escape(text[last:]))
    return mark_safe("".join(pieces))  # each piece escaped above


@register.filter
def upstreams_named_text(text: str, team_id: int) -> str:
    """`text` with each job or array of the team it names by id said by its quoted name: for plain text."""
    names = _names(text or "", team_id)
    return NAMED_BY_ID.sub(
        lambda found: (
            f"{found[1]} “{names[(found[1], found[2])]}”" if (found[1], found[2]) in names else f"another {found[1]}"
        ),
        text or "",
    )

"""A reason a job or array was given (`its dependency can never be met: job <id> ended failed`, `waits for array
<id> succeeds`) as a person reads it: each job or array it names by id said by its name, linked to its page.

The reasons are kept with ids (the API and the CLI read them, and a name is not unique); the pages put the names
in, `{{ job.reason|upstreams_named:job }}` with the job or array whose reason it is: from the names a list read
for all its jobs at once (jobs.web.upstreams.read_names), else in one query for this reason."""

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from jobs.models import Job, JobArray
from jobs.web import upstreams
from jobs.web.upstreams import NAMED_BY_ID, names_for

register = template.Library()


@register.filter
def upstreams_named(text: str, owner: Job | JobArray) -> SafeString:
    """`text`, escaped, each job or array of the owner's team it names by id said by its name, linked to its
    page (one of another team, or gone, as "another job")."""
    text = text or ""
    names = names_for(text, owner)
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
def upstreams_named_text(text: str, owner: Job | JobArray) -> str:
    """`text` with each job or array of the owner's team it names by id said by its quoted name: for plain text."""
    return upstreams.named_text(text, owner)

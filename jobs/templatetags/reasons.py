"""A reason a job or array was given as a person reads it: each job or array it names by id said by its name,
linked to its page (`{{ job.reason|upstreams_named:job }}`; the names read by jobs.web.upstreams)."""

import re

from django import template
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from jobs.models import Job, JobArray
from jobs.web import upstreams
from jobs.web.upstreams import NAMED_BY_ID, names_for

register = template.Library()


@register.filter
def upstreams_named(text: str, owner: Job | JobArray) -> SafeString:
    """`text`, escaped, each job or array of the owner's team it names by id said by its name, linked to its
    page (one of another team, or gone, as "another job")."""
    names = names_for(text or "", owner)

    def said(found: re.Match[str]) -> str:
        kind, pk = found.groups()
        if (name := names.get((kind, pk))) is None:
            return f"another {kind}"
        page = reverse("jobs:detail" if kind == "job" else "jobs:array", args=[pk])
        return format_html('{} <a href="{}">{}</a>', kind, page, name)

    # Escaping leaves the ids and their kinds as they are, and their word boundaries.
    return mark_safe(NAMED_BY_ID.sub(said, escape(text or "")))


@register.filter
def upstreams_named_text(text: str, owner: Job | JobArray) -> str:
    """`text` with each job or array of the owner's team it names by id said by its quoted name: for plain text."""
    return upstreams.named_text(text, owner)

"""The names of the jobs and arrays a reason names by id (`waits for job <id> to succeed`; ids, as the API keeps
them), for the pages to say each by its name: a list reads them all at once (`read_names`)."""

import re
import uuid
from collections.abc import Sequence

from jobs.models import Job, JobArray

NAMED_BY_ID = re.compile(r"\b(job|array) ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
MODELS: dict[str, type[Job] | type[JobArray]] = {"job": Job, "array": JobArray}

# (kind, id) → the name of the job or array of the reason's team; None for one of another team, or gone.
Names = dict[tuple[str, str], str | None]


def names_of(reasons: Sequence[tuple[str, int]]) -> list[Names]:
    """For each (reason, its team's id): the names of what the reason names by id, each only if of that team;
    one query per kind named (two at most) whatever the number of reasons."""
    found = [NAMED_BY_ID.findall(text or "") for text, _ in reasons]
    teams = {team_id for (_, team_id), named in zip(reasons, found, strict=True) if named}
    rows: dict[tuple[str, str], tuple[int, str]] = {}
    for kind, model in MODELS.items():
        ids = {uuid.UUID(pk) for named in found for k, pk in named if k == kind}
        if ids:
            read = model.objects.filter(team_id__in=teams, pk__in=ids).values_list("pk", "team_id", "name")
            rows.update({(kind, str(pk)): (team_id, name) for pk, team_id, name in read})
    return [
        {key: row[1] if (row := rows.get(key)) is not None and row[0] == team_id else None for key in named}
        for named, (_, team_id) in zip(found, reasons, strict=True)
    ]


def read_names(owners: Sequence[Job], field: str) -> None:
    """The names `field` (a reason) of each of `owners` names, read for them all at once into each one's
    `upstream_names`, where the pages' filters find them (names_for)."""
    for owner, names in zip(owners, names_of([(getattr(o, field), o.team_id) for o in owners]), strict=True):
        owner.upstream_names = {**getattr(owner, "upstream_names", {}), **names}  # type: ignore[attr-defined]


def names_for(text: str, owner: Job | JobArray) -> Names:
    """The names `text`, a reason of `owner`, names by id: those read_names read for it, the rest read now and
    kept on it, so a job page's many events naming the same upstream read it once."""
    known: Names = getattr(owner, "upstream_names", {})
    unread = [f"{kind} {pk}" for kind, pk in NAMED_BY_ID.findall(text or "") if (kind, pk) not in known]
    if not unread:
        return known
    owner.upstream_names = {**known, **names_of([(" ".join(unread), owner.team_id)])[0]}  # type: ignore[union-attr]
    return owner.upstream_names  # type: ignore[union-attr]


def named_text(text: str, owner: Job | JobArray) -> str:
    """`text`, a reason of `owner`, with each job or array of its team it names by id said by its quoted name (one
    of another team, or gone, as "another job"): for plain text, as the admin shows it."""
    names = names_for(text or "", owner)

    def said(found: re.Match[str]) -> str:
        name = names.get((found[1], found[2]))
        return f"{found[1]} “{name}”" if name is not None else f"another {found[1]}"

    return NAMED_BY_ID.sub(said, text or "")

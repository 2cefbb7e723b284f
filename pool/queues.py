"""Which queue a team's job waits in, and whether it may: the rules a submission is checked by."""

from dataclasses import dataclass
from typing import Any, cast

from django.db import transaction
from django.db.models import Q

from pool.models import Queue, with_team_ids
from teams.models import Team


def make_default_queue(using: str = "default", **kwargs: Any) -> None:
    """A pool with no queue at all gets its default, `batch`: after the first migrate, and after a flush
    (which sends post_migrate, as Django's own defaults rely on). Queues operators made are left as they are."""
    if not Queue.objects.using(using).exists():
        Queue.objects.using(using).create(
            name="batch", description="where jobs wait unless they name a queue", is_default=True
        )


@dataclass(frozen=True)
class Refusal:
    """Why a job may not wait in a queue: the submission's field at fault, and what to say."""

    field: str
    message: str


def default_queue(team: Team) -> Queue | None:
    """The team's own default queue (TeamQueue), else the pool's, of those the team may use (None: none, and a
    job of no queue is served as the default queue would be: pool.scheduler.Queues.of); one query.

    At most two queues are candidates (a team has one own default, the pool one default), so they are read
    with the teams they name and chosen here: a query of joins and no subqueries, cheap to build on every
    submission."""
    candidates = with_team_ids(Queue.objects.filter(Q(default_for__team=team) | Q(is_default=True)))
    # Only a queue the team may use (as may_use): an operator may have kept its own default for others since.
    usable = [queue for queue in candidates if may_use(queue, team)]
    # A candidate that is not the pool's default is the team's own (the filter found it so): it goes first.
    return min(usable, key=lambda queue: queue.is_default, default=None)


def queue_for(team: Team, name: str) -> Queue | Refusal | None:
    """The queue named (else the team's default, as default_queue), or why the team may not use it."""
    if not name:
        found = default_queue(team)
        if found is None and Queue.objects.filter(is_default=True).exists():  # kept for other teams
            return Refusal("queue", f"The team {team.slug} may use no default queue: name one it may use.")
        return found
    queue = Queue.objects.prefetch_related("teams").filter(name=name).first()
    if queue is None:
        # Only those the team may use, as the form offers: another team's queues are not its business.
        usable = [q.name for q in Queue.objects.prefetch_related("teams") if may_use(q, team)]
        known = ", ".join(usable) or "none"
        return Refusal("queue", f"There is no queue {name}: the queues are {known}.")
    if not may_use(queue, team):
        return Refusal("queue", f"The team {team.slug} may not use the queue {name}.")
    return queue


def may_use(queue: Queue, team: Team) -> bool:
    """Every team may use a queue that names none; else only those it names (its teams prefetched or read)."""
    named = queue.team_ids
    return not named or team.pk in named


def preemption_words(queue: Queue) -> str:
    """Whether a queue's jobs preempt, in an operator's words (the admin, `demo_queues`): Queue.preempts decides."""
    if not queue.preempts_lower:
        return "does not preempt"
    if not queue.preempts:
        return (
            "does not preempt now: a preempting queue must name the teams that may use it, and this one names "
            "none; its jobs are served by its priority but take no one's cores until an operator chooses its teams"
        )
    slugs = sorted(t.slug for t in queue.teams.all())
    return f"preempts lower queues' jobs; only the team{'s' * (len(slugs) > 1)} {', '.join(slugs)} may use it"


def refusals(queue: Queue, *, cpus: int, preemptable: bool) -> list[Refusal]:
    """What a job of this request may not ask in its queue: opting out of preemption where the queue does
    not allow it, more cores than a team may hold there at once (it would wait for ever)."""
    found = []
    if not preemptable and queue.preemptable and not queue.opt_out_allowed:
        found.append(
            Refusal("preemptable", f"The queue {queue.name} does not let a job opt out of preemption (preemptable).")
        )
    if (cap := queue.max_running_cores_per_team) is not None and cpus > cap:
        said = f"The queue {queue.name} lets a team hold at most {cap} cores at once: this job asks {cpus}."
        found.append(Refusal("cpus", said))
    return found


# The queues `make run` starts with (pool/management/commands/demo_queues.py); "teams" names the teams (by
# slug) that may use a queue: a preempting queue must name them (Queue.preempts), urgent names the demo's.
DEMO_QUEUES: dict[str, dict[str, object]] = {
    "urgent": {
        "priority": 100, "preempts_lower": True, "opt_out_allowed": True, "teams": ["demo"],
        "description": "served first; its jobs take the cores of lower queues' preemptable jobs",
    },
    "batch": {
        "priority": 50, "is_default": True, "opt_out_allowed": True,
        "description": "where jobs wait unless they name a queue",
    },
    "scavenger": {
        "priority": 0, "opt_out_allowed": False,
        "description": "idle cores only: served last, always preemptable",
    },
}  # fmt: skip


class NoSuchTeam(Exception):
    """A queue's policy names a team that does not exist."""


@transaction.atomic
def define_queues(policies: dict[str, dict[str, object]]) -> list[tuple[Queue, bool]]:
    """Make each queue of these policies, or set its policy when no one has changed it in the admin since
    (changed_at empty: made by a migration or by this); [(queue, whether it was written)]. A policy's
    "teams" are slugs of teams that must exist (NoSuchTeam); none: every team may use the queue."""
    written = []
    others = Queue.objects.filter(is_default=True).exclude(name__in=policies)
    others.filter(changed_at__isnull=True).update(is_default=False)
    kept_default = others.exists()  # an operator's choice of default stays (and there is only one)
    for name, policy in policies.items():
        fields = {k: v for k, v in policy.items() if k != "teams" and not (kept_default and k == "is_default")}
        teams = _teams(name, cast(list[str], policy.get("teams", [])))
        queue, created = Queue.objects.get_or_create(name=name, defaults=fields)
        if created:
            queue.teams.set(teams)
        elif queue.changed_at is None and (
            any(getattr(queue, k) != v for k, v in fields.items()) or set(queue.teams.all()) != set(teams)
        ):
            for key, value in fields.items():
                setattr(queue, key, value)
            queue.save(update_fields=list(fields))
            queue.teams.set(teams)
            created = True
        written.append((queue, created))
    return written


def _teams(queue: str, slugs: list[str]) -> list[Team]:
    teams = list(Team.objects.filter(slug__in=slugs))
    if missing := sorted(set(slugs) - {t.slug for t in teams}):
        raise NoSuchTeam(f"the queue {queue} names the team {', '.join(missing)}, which does not exist")
    return teams

"""The last judged round of each node under each runtime, and each boundary's verdicts, failures first."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, OuterRef, Q, Subquery

from isolation import probes
from isolation.models import ProbeResult, ProbeRound, Verdict


@dataclass
class NodeStatus:
    node: str
    runtime: str
    round: ProbeRound
    failed: list[ProbeResult] = field(default_factory=list)
    inconclusive: list[ProbeResult] = field(default_factory=list)
    passed: int = 0

    @property
    def verified_at(self) -> datetime | None:
        return self.round.judged_at


@dataclass
class Boundary:
    probe: probes.Probe
    results: list[ProbeResult] = field(default_factory=list)


def last_rounds(*, with_results: bool = True) -> list[ProbeRound]:
    latest = (
        ProbeRound.objects.filter(node=OuterRef("node"), runtime=OuterRef("runtime"), judged_at__isnull=False)
        .order_by("-judged_at", "-id")
        .values("pk")[:1]
    )
    rounds = ProbeRound.objects.filter(pk=Subquery(latest)).select_related("node").order_by("node__name", "runtime")
    return list(rounds.prefetch_related("results") if with_results else rounds)


def node_statuses(rounds: list[ProbeRound] | None = None) -> list[NodeStatus]:
    """Each node and runtime's last round, failures first; without `rounds`, only what the operator panel shows."""
    if rounds is not None:
        results = {r.pk: list(r.results.all()) for r in rounds}
        passed = {pk: sum(1 for x in found if x.verdict == Verdict.PASSED) for pk, found in results.items()}
    else:
        rounds = last_rounds(with_results=False)
        ids = [r.pk for r in rounds]
        of_rounds = ProbeResult.objects.filter(round_id__in=ids)
        counted = of_rounds.filter(verdict=Verdict.PASSED).values("round_id").annotate(n=Count("id")).order_by()
        passed = {row["round_id"]: row["n"] for row in counted}
        results = {pk: [] for pk in ids}
        for result in of_rounds.exclude(verdict=Verdict.PASSED).defer("evidence"):  # in the order of the prefetch
            results[result.round_id].append(result)
    statuses = []
    for round in rounds:
        status = NodeStatus(node=round.node.name, runtime=round.runtime, round=round, passed=passed.get(round.pk, 0))
        for result in results[round.pk]:
            if result.verdict == Verdict.FAILED:
                status.failed.append(result)
            elif result.verdict != Verdict.PASSED:
                status.inconclusive.append(result)
        statuses.append(status)
    return sorted(statuses, key=lambda s: (not s.failed, not s.inconclusive, s.node, s.runtime))


def boundaries(rounds: list[ProbeRound]) -> list[Boundary]:
    """Every probe's boundary with its result in each round, failed ones first within a boundary."""
    found = {p.name: Boundary(p) for p in probes.PROBES}
    for round in rounds:
        for result in round.results.all():
            if result.probe in found:
                result.round = round  # the prefetched round, with its node
                found[result.probe].results.append(result)
    for boundary in found.values():
        boundary.results.sort(key=lambda r: (r.verdict != Verdict.FAILED, r.round.node.name, r.round.runtime))
    return list(found.values())


@dataclass(frozen=True)
class ProbeSummary:
    """The probes judged in a window: how many, and how many found a boundary crossed or could not tell."""

    hours: int
    run: int
    failed: int
    inconclusive: int


def probe_summary(*, now: datetime, hours: int = 24) -> ProbeSummary:
    """The probes judged in the last `hours`: verdicts, as some probes must end failed to pass."""
    counts = ProbeResult.objects.filter(at__gte=now - timedelta(hours=hours)).aggregate(
        run=Count("id"),
        failed=Count("id", filter=Q(verdict=Verdict.FAILED)),
        inconclusive=Count("id", filter=Q(verdict=Verdict.INCONCLUSIVE)),
    )
    return ProbeSummary(hours=hours, **counts)

"""Prometheus metrics of the pool (`/metrics`), read from the database so every web server answers the same."""

import hmac
from collections.abc import Iterator
from ipaddress import ip_address

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from accounting.models import Ledger
from accounting.verification import last_verification
from jobs.models import Job
from pool.models import Hold, Node
from pool.nodes import free_capacity


class PoolCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        jobs = GaugeMetricFamily(
            "e31_jobs", "Jobs by stage and outcome (outcome empty before release).", labels=["stage", "outcome"]
        )
        for row in Job.objects.values("stage", "outcome").annotate(n=Count("id")).order_by("stage", "outcome"):
            jobs.add_metric([row["stage"], row["outcome"]], row["n"])
        yield jobs

        yield GaugeMetricFamily(
            "e31_holds", "Holds not released.", value=Hold.objects.filter(released_at__isnull=True).count()
        )

        nodes = list(Node.objects.order_by("name"))
        free = free_capacity(nodes)
        held = GaugeMetricFamily("e31_node_cores_held", "Cores held on the node.", labels=["node", "state"])
        available = GaugeMetricFamily("e31_node_cores_free", "Cores free on the node.", labels=["node", "state"])
        for node in nodes:
            free_cores = len(free[node.pk].cpu_ids)
            held.add_metric([node.name, node.state], node.cpus - free_cores)
            available.add_metric([node.name, node.state], free_cores)
        yield held
        yield available

        waiting = Job.objects.waiting().aggregate(n=Count("id"), oldest=Min("submitted_at"))
        yield GaugeMetricFamily("e31_queue_length", "Jobs waiting for compute.", value=waiting["n"])
        oldest = (now - waiting["oldest"]).total_seconds() if waiting["oldest"] else 0.0
        yield GaugeMetricFamily(
            "e31_queue_oldest_wait_seconds", "How long the oldest waiting job has waited.", value=max(oldest, 0.0)
        )

        ledger = Ledger.objects.filter(pk=1).first()
        yield CounterMetricFamily(
            "e31_records",
            "Accounting records written (the ledger's last sequence).",
            value=ledger.last_sequence if ledger else 0,
        )

        last = last_verification()
        ok = GaugeMetricFamily(
            "e31_ledger_verified", "1 when the last verify_ledger found the ledger intact, 0 when not, -1 never run."
        )
        ok.add_metric([], -1 if last is None else int(last.ok))
        yield ok
        if last is not None:
            yield GaugeMetricFamily(
                "e31_ledger_verified_records", "Records the last verify_ledger checked.", value=last.records
            )
            yield GaugeMetricFamily(
                "e31_ledger_verified_timestamp_seconds",
                "When the last verify_ledger ran (Unix time).",
                value=last.ran_at.timestamp(),
            )


def allowed(request: HttpRequest) -> bool:
    """With E31_METRICS_TOKEN: the bearer token; without: a loopback client only."""
    token: str | None = settings.E31_METRICS_TOKEN
    if token:
        return hmac.compare_digest(request.headers.get("Authorization", "").encode(), f"Bearer {token}".encode())
    try:
        return ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        response = HttpResponse("Not allowed: send the metrics token.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = "Bearer"
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PoolCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

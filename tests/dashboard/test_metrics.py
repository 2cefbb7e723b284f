"""/metrics: the Prometheus text format, holding the numbers the database holds; a token or loopback only."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.lifecycle.actions import hold
from jobs.models import Job
from pool.nodes import Capacity, register
from pool.placement.types import Placement
from tests.factories import run_to_release, submit_job


def samples(response) -> dict[tuple[str, tuple], float]:
    assert response.status_code == 200, response.content
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.fixture
def pool_state(member, team):
    """Two nodes; a job released, one held, two waiting."""
    now = timezone.now()
    n1 = register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=now)
    register("n2", Capacity(cpu_ids=[0, 1], memory_mb=2048, gpu_ids=[]), now=now)
    done, running = submit_job(member, team), submit_job(member, team, cpus=3)
    hold([Placement(done.pk, 1, n1, [0], [], done.memory_mb)], now=now - timedelta(minutes=5))
    done.refresh_from_db()
    run_to_release(done, now=now)
    hold([Placement(running.pk, 1, n1, [1, 2, 3], [], running.memory_mb)], now=now)
    waiting = [submit_job(member, team), submit_job(member, team)]
    Job.objects.filter(pk=waiting[0].pk).update(submitted_at=now - timedelta(minutes=10))
    return now


def test_metrics_hold_what_the_database_holds(client, pool_state):
    call_command("verify_ledger")

    found = samples(client.get("/metrics"))

    jobs = {labels: value for (name, labels), value in found.items() if name == "e31_jobs" and value}
    assert jobs == {
        (("outcome", "succeeded"), ("stage", "release")): 1,  # the job released
        (("outcome", ""), ("stage", "rent")): 1,  # the job held
        (("outcome", ""), ("stage", "submit")): 2,  # the two waiting
    }
    assert found[("e31_holds", ())] == 1
    assert found[("e31_node_cores_held", (("node", "n1"), ("state", "active")))] == 3
    assert found[("e31_node_cores_free", (("node", "n1"), ("state", "active")))] == 1
    assert found[("e31_node_cores_free", (("node", "n2"), ("state", "active")))] == 2
    assert found[("e31_queue_length", ())] == 2
    assert 600 <= found[("e31_queue_oldest_wait_seconds", ())] < 3600  # the older waits ten minutes
    assert found[("e31_records_total", ())] == 1
    assert found[("e31_ledger_verified", ())] == 1 and found[("e31_ledger_verified_records", ())] == 1


def test_the_ledger_result_is_minus_one_before_any_check(client, db):
    assert samples(client.get("/metrics"))[("e31_ledger_verified", ())] == -1


def test_with_a_token_the_bearer_is_required(client, db, settings):
    settings.E31_METRICS_TOKEN = "t" * 40

    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {'t' * 40}").status_code == 200


def test_without_a_token_only_loopback_clients_are_answered(client, db):
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_wrong_method_is_405(client, db):
    assert client.post("/metrics").status_code == 405

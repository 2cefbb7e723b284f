"""/isolation/ and a probe's evidence: every signed-in member sees them; failures come first."""

import pytest
from django.utils import timezone

from isolation.checks import judge_round, start_round
from isolation.models import ProbeRound, Verdict
from isolation.status import node_statuses
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job
from jobs.storage import logs
from tests.factories import RuntimeImageFactory, run_to_release

ROOT_REPORT = b"uid=10001\neuid=10001\ngid=10001\ngroups=10001\n"


@pytest.fixture
def judged(local_node):
    """A judged round on this node: the root probe passed (its log says so), the network probe
    failed (its log shows nothing it tried)."""
    RuntimeImageFactory(name="python", reference="e31/python:3")
    round = start_round(local_node, "runc", now=timezone.now(), trigger="test", only=["root", "network"])
    schedule_pass(now=timezone.now())
    for result in round.results.all():
        if result.probe == "root":
            logs.append(result.job_id, 0, ROOT_REPORT)
        run_to_release(Job.objects.get(pk=result.job_id), now=timezone.now())
    assert judge_round(round, now=timezone.now())
    return round


def test_member_sees_each_boundary_its_mechanism_and_the_last_verdict_per_node(client, member, judged):
    client.force_login(member)

    response = client.get("/isolation/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "A job never runs as root." in page and "an unprivileged uid of its own" in page
    assert "A job has no network" in page and "Not verified on any node yet." in page  # the probes not run
    root = judged.results.get(probe="root")
    assert f'href="/isolation/results/{root.pk}/"' in page and f'hx-get="/isolation/results/{root.pk}/"' in page
    assert "<script>" not in page and "style=" not in page  # the CSP allows neither inline


def test_the_node_panel_lists_failures_first(client, member, judged, local_node):
    client.force_login(member)

    page = client.get("/isolation/").content.decode()

    (status,) = node_statuses()
    assert [r.probe for r in status.failed] == ["network"] and status.passed == 1
    assert page.index("network failed") < page.index("1 passed")


def test_evidence_is_one_click_away_as_a_page_or_an_htmx_panel(client, member, judged):
    client.force_login(member)
    network = judged.results.get(probe="network")

    page = client.get(f"/isolation/results/{network.pk}/")
    panel = client.get(f"/isolation/results/{network.pk}/", headers={"HX-Request": "true"})

    assert page.status_code == panel.status_code == 200
    assert network.verdict == Verdict.FAILED
    assert network.evidence in page.content.decode() and "<html" in page.content.decode()
    assert network.evidence in panel.content.decode() and "<html" not in panel.content.decode()


def test_outsider_member_of_another_team_sees_the_page_too(client, outsider, judged):
    client.force_login(outsider)

    response = client.get("/isolation/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "A job never runs as root." in page and "A job has no network" in page
    assert f'href="/isolation/results/{judged.results.get(probe="root").pk}/"' in page


@pytest.mark.django_db
def test_anonymous_is_sent_to_log_in(client):
    for url in ("/isolation/", "/isolation/results/1/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_missing_result_is_404(client, member):
    client.force_login(member)

    assert client.get("/isolation/results/999999/").status_code == 404


def test_wrong_method_is_405(client, member, judged):
    client.force_login(member)

    assert client.post("/isolation/").status_code == 405
    assert client.post(f"/isolation/results/{judged.results.first().pk}/").status_code == 405


def test_the_page_reads_a_bounded_number_of_queries(client, member, judged, django_assert_max_num_queries):
    client.force_login(member)
    start_round(judged.node, "runsc", now=timezone.now(), trigger="test", only=["root"])  # not judged: not shown

    with django_assert_max_num_queries(8):
        assert client.get("/isolation/").status_code == 200
    assert ProbeRound.objects.count() == 2

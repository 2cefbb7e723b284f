"""Every isolation probe, run through the real pipeline on real containers: each boundary holds under
both runtimes, and each probe fails when the one rule that keeps it in is taken away."""

import pytest
from django.utils import timezone

from isolation import probes
from isolation.checks import start_round
from isolation.models import Verdict
from tests.isolation.helpers import evidence, run_round_here, verdicts, without_rule

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def node(local_node, images, settings):
    """This machine as the node, with small caps so the probes that fill them finish fast."""
    settings.E31_OUTPUT_MAX_FILES = 20
    settings.E31_PIDS_LIMIT = 64
    if len(local_node.cpu_ids) < 2:
        pytest.skip("needs a node with two cores: the decoy runs beside the probes")
    return local_node


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_every_probe_passes_on_the_node(node, runtime):
    round = run_round_here(start_round(node, runtime, now=timezone.now(), trigger="test"))

    assert verdicts(round) == {p.name: Verdict.PASSED for p in probes.PROBES}, "\n".join(evidence(round).values())
    assert round.results.get(probe="staged-data").evidence.endswith("while the decoy ran beside it")


@pytest.mark.parametrize("probe", [p.name for p in probes.PROBES])
def test_probe_fails_when_its_rule_is_removed(node, probe, monkeypatch):
    with without_rule(probe, monkeypatch) as taken:
        round = run_round_here(start_round(node, "runc", now=timezone.now(), trigger="test", only=[probe]))

    assert verdicts(round) == {probe: Verdict.FAILED}, (taken, evidence(round))

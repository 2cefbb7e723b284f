"""A node whose probe fails is drained at once, the probe named as the reason; `isolation_check`
exits non-zero naming it."""

import io

import pytest
from django.utils import timezone

from isolation.checks import judge_round, start_round
from isolation.management.commands.isolation_check import Command
from isolation.models import Verdict
from pool.models import Node
from tests.isolation.helpers import run_round_here, verdicts, without_rule

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def leaky_round(local_node, images, monkeypatch):
    """A round of the network probe run where the sandbox was configured with the host's network."""
    with without_rule("network", monkeypatch):
        return run_round_here(start_round(local_node, "runc", now=timezone.now(), trigger="test", only=["network"]))


def test_a_failed_probe_drains_its_node_naming_the_probe(leaky_round, local_node):
    assert verdicts(leaky_round) == {"network": Verdict.FAILED}
    local_node.refresh_from_db()
    assert local_node.state == Node.State.DRAINING
    change = local_node.state_changes.first()
    assert change.by is None and change.to_state == Node.State.DRAINING
    assert change.reason == "isolation probe network failed under runc (evidence on /isolation/)"
    evidence = leaky_round.results.get().evidence
    assert "tcp_6379 reached" in evidence, evidence


def test_judging_a_round_again_changes_nothing(leaky_round, local_node):
    assert judge_round(leaky_round, now=timezone.now())

    assert local_node.state_changes.count() == 1


def test_isolation_check_exits_nonzero_naming_the_failed_probe(leaky_round):
    command = Command(stdout=io.StringIO())

    with pytest.raises(SystemExit) as exited:
        command.report([leaky_round], unfinished=set())

    assert exited.value.code == 1
    out = command.stdout.getvalue()
    assert "  failed       network" in out
    assert out.splitlines()[-1] == "0 probes passed, 1 failed"

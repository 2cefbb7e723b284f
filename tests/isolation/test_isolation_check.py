"""`manage.py isolation_check` end to end: the probes go through a real Celery worker (the node
"stack") on real containers, under each runtime, and the command reports them."""

import pytest
from django.core.management import CommandError, call_command

from isolation import probes
from isolation.models import ProbeRound, Verdict
from pool.models import Node

pytestmark = [pytest.mark.docker, pytest.mark.celery]


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_isolation_check_passes_every_probe_on_the_test_node(stack, stack_node, runtime, capsys):
    call_command("isolation_check", "--node", stack_node.name, "--runtime", runtime, "--timeout", "400")

    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"{len(probes.PROBES)} probes passed, 0 failed", out
    round = ProbeRound.objects.get(node=stack_node, runtime=runtime)
    assert round.judged_at is not None and round.trigger == "command"
    assert {r.verdict for r in round.results.all()} == {Verdict.PASSED}
    stack_node.refresh_from_db()
    assert stack_node.state == Node.State.ACTIVE


@pytest.mark.django_db
def test_isolation_check_refuses_an_unknown_runtime_or_node(local_node):
    with pytest.raises(CommandError, match="unknown runtime 'kata'"):
        call_command("isolation_check", "--runtime", "kata")
    with pytest.raises(CommandError, match="no node named 'nowhere'"):
        call_command("isolation_check", "--node", "nowhere")
    assert not ProbeRound.objects.exists()

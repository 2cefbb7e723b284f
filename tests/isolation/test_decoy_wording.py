"""The staged-data probe's inconclusive evidence, when the decoy did not run beside it, says why in
words true for the node: "cannot run both" only on a node of one core; on a larger node, when each ran."""

from datetime import timedelta

import pytest
from django.utils import timezone

from isolation.checks import judge_round, start_round
from isolation.models import Verdict
from isolation.probes import Seen, judge_staged_data
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job
from jobs.storage import logs
from pool.nodes import Capacity, register
from tests.factories import RuntimeImageFactory, run_to_release

FOUND_NOTHING = b"files_read=12\nfound=none\n"


def seen(**apart) -> Seen:
    return Seen(report={"files_read": "12", "found": "none"}, lines=[], log="", outcome="succeeded", exit_code=0,
                reason="", outputs={}, cpu_set=[0], memory_mb=128, runtime="runc", uids=range(10001, 10002),
                pids_limit=256, output_files=1000, output_entries=1065, decoy_secret="E31-DECOY-x",
                beside_decoy=False, **apart)  # fmt: skip


def test_one_core_says_it_cannot_run_both():
    verdict = judge_staged_data(seen(node_cpus=1, decoy_ran="10:00:00–10:00:10 UTC", probe_ran="10:00:11–10:00:12 UTC"))

    assert verdict.verdict == Verdict.INCONCLUSIVE
    assert verdict.evidence.endswith(
        "but the decoy did not run at the same time (a node with one core cannot run both)"
    )


def test_two_cores_say_when_each_ran_not_that_one_core_cannot():
    verdict = judge_staged_data(seen(node_cpus=2, decoy_ran="10:00:00–10:00:10 UTC", probe_ran="10:00:30–10:00:31 UTC"))

    assert verdict.verdict == Verdict.INCONCLUSIVE
    assert "one core" not in verdict.evidence
    assert verdict.evidence.endswith(
        "(the decoy ran 10:00:00–10:00:10 UTC, the probe 10:00:30–10:00:31 UTC, on this node of 2 cores)"
    )


def test_a_decoy_that_never_started_is_said_so():
    verdict = judge_staged_data(seen(node_cpus=4, decoy_ran="", probe_ran="10:00:30–10:00:31 UTC"))

    assert "(the decoy ran not at all, the probe 10:00:30–10:00:31 UTC, on this node of 4 cores)" in verdict.evidence


@pytest.mark.parametrize(
    ("cores", "why"),
    [
        ([0], "(a node with one core cannot run both)"),
        ([0, 1], "the decoy ran 10:00:00–10:00:00 UTC, the probe 10:00:20–10:00:20 UTC, on this node of 2 cores)"),
    ],
)
def test_a_round_judged_on_the_node_gives_its_real_core_count(db, cores, why):
    """Through the real round: the decoy runs and ends, then the probe runs (on one core it could only wait)."""
    RuntimeImageFactory(name="python", reference="e31/python:3")
    node = register("probed", Capacity(cpu_ids=cores, memory_mb=4096, gpu_ids=[]), now=timezone.now())
    at = timezone.now().replace(hour=10, minute=0, second=0, microsecond=0)
    round = start_round(node, "runc", now=at, trigger="test", only=["staged-data"])
    (result,) = round.results.all()
    schedule_pass(now=at)
    run_to_release(Job.objects.get(pk=round.decoy_id), now=at)
    schedule_pass(now=at + timedelta(seconds=10))  # on one core the probe is held only now
    logs.append(result.job_id, 0, FOUND_NOTHING)
    run_to_release(Job.objects.get(pk=result.job_id), now=at + timedelta(seconds=20))

    assert judge_round(round, now=at + timedelta(seconds=30))

    result.refresh_from_db()
    assert result.verdict == Verdict.INCONCLUSIVE
    assert result.evidence.endswith(why)
    assert ("one core" in result.evidence) == (len(cores) == 1)

"""Isolation under load: 20 jobs of 4 teams at once on the two real nodes of tests/e2e/test_pool.py,
each reading its own secret data and writing outputs, while a round of probes runs on each node."""

import secrets

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.utils import timezone

from accounting.models import Record
from isolation.checks import judge_round, start_round
from isolation.models import Verdict
from jobs.models import Job, Outcome
from jobs.storage.logs import read_log
from jobs.storage.store import output_key
from pool.models import Hold, Node
from tests.conftest import api_client_for, wait_for_release, wait_until
from tests.e2e.test_pool import NODES, engine, pool, pool_workers  # noqa: F401 (the pool's fixtures)
from tests.factories import TeamFactory, member_of, submit_job

pytestmark = [pytest.mark.docker, pytest.mark.celery]

MARK = "LOAD" + "SECRET-"
LOOK = (
    "cat /data/secret.txt > /output/mine.txt; echo \"seen=$(cat /data/* | tr '\\n' ' ')\"; "
    "echo procs=$(ls -d /proc/[0-9]* | wc -l); "
    # Every folder a job could write or be given (not /proc and /sys: reading some of their files blocks).
    f'echo found=$(grep -rl {MARK[:4]}"{MARK[4:]}" /data /output /tmp /var /etc /run /mnt /root /home /srv /opt '
    "2>/dev/null | grep -v -e ^/data/secret.txt -e ^/output/mine.txt | wc -l); sleep 1"
)


# The store the nodes' workers use (tests/conftest.py gives each in-process test one of its own).
SHARED_STORAGES = settings.STORAGES


@pytest.fixture
def shared_store(settings):
    settings.STORAGES = SHARED_STORAGES


@pytest.mark.usefixtures("pool", "shared_store")
def test_twenty_jobs_of_four_teams_beside_the_probes_see_only_their_own():
    now = timezone.now()
    rounds = [start_round(Node.objects.get(name=name), "runc", now=now, trigger="test") for name in NODES]
    teams = [TeamFactory(slug=f"load-{i}") for i in range(4)]
    members = [member_of(team, f"load-member-{i}") for i, team in enumerate(teams)]
    jobs = {}
    for i in range(20):
        team, member = teams[i % 4], members[i % 4]
        secret = f"{MARK}{team.slug}-{i}-{secrets.token_hex(8)}"
        job = submit_job(member, team, command=LOOK, files={"secret.txt": secret}, time_limit_s=60)
        jobs[job.pk] = (job, members[(i + 1) % 4], secret)  # with a member of another team

    for job, _, _ in jobs.values():
        wait_for_release(job, timeout=400)
    wait_until(lambda: all(judge_round(r, now=timezone.now()) for r in rounds), 400, 1, message="the probes")

    every_secret = {secret for _, _, secret in jobs.values()}
    for job, outsider, secret in jobs.values():
        member = members[teams.index(job.team)]
        assert job.outcome == Outcome.SUCCEEDED, (job.reason, job.pk)
        report = dict(line.partition("=")[::2] for line in job_log(job).splitlines() if "=" in line)
        assert report["seen"].strip() == secret and report["found"] == "0", report
        assert int(report["procs"]) <= 5, report  # its shell and the commands counting: none of another job
        assert not (every_secret - {secret}) & set(job_log(job).split()), "another job's secret in its log"
        assert [(o.path, read_output(job, o.path)) for o in job.output_files.all()] == [("mine.txt", secret)]
        assert Record.objects.filter(job=job).count() == 1
        mine = api_client_for(member).get(f"/api/v1/jobs/{job.pk}/outputs/mine.txt")
        assert mine.status_code == 200 and b"".join(mine.streaming_content).decode() == secret
        assert api_client_for(outsider).get(f"/api/v1/jobs/{job.pk}/outputs/mine.txt").status_code == 404
    # No two runs on a node ever had one core at the same time, probes and jobs alike: their containers
    # ran (started_at to finished_at) one after the other on each core.
    holds = list(Hold.objects.filter(job__in=[*jobs, *probe_jobs(rounds)]).select_related("node", "job"))
    for a in holds:
        for b in holds:
            if a.pk < b.pk and a.node_id == b.node_id and set(a.cpu_set) & set(b.cpu_set):
                first, then = sorted([a.job, b.job], key=lambda j: j.started_at)
                assert first.finished_at <= then.started_at, (a, b)
    verdicts = {(r.round.node.name, r.probe): r.verdict for round in rounds for r in round.results.all()}
    assert Verdict.FAILED not in verdicts.values(), failed_probes(rounds)
    assert {n: Node.objects.get(name=n).state for n in NODES} == dict.fromkeys(NODES, Node.State.ACTIVE)


def job_log(job: Job) -> str:
    return read_log(job.pk)[0].decode(errors="replace")


def read_output(job: Job, path: str) -> str:
    with default_storage.open(output_key(job.pk, path)) as f:
        return f.read().decode()


def failed_probes(rounds) -> str:
    """Each failed probe's evidence, and how its job ended, for the assertion's message."""
    failed = []
    for round in rounds:
        for result in round.results.filter(verdict=Verdict.FAILED).select_related("job"):
            job = result.job
            ended = f"{job.outcome} (exit {job.exit_code}): {job.reason!r}" if job else "its job is gone"
            failed.append(
                f"{round.node.name} {result.probe}: {result.evidence}; the job ended {ended}; "
                f"its log ends {job_log(job)[-600:] if job else ''!r}"
            )
    return "\n".join(failed)


def probe_jobs(rounds) -> list:
    return [r.job_id for round in rounds for r in round.results.all()] + [r.decoy_id for r in rounds]

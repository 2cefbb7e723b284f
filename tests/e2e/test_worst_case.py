"""A team's budget holds through the real stack: a job's worst case at admission is everything the
meter counts (its time limit and the platform's overhead), so a team at its budget ends within it."""

import json
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting import budgets
from accounting.models import Budget, BudgetUnit, Record
from jobs.models import Job, Outcome, OutputFile
from tests.conftest import wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]

# One core for 12 s and the overhead (60 s by default): 72 core-seconds, 0.02 core-hours exactly, which
# a budget (two decimal places) can be set to.
ASKED = {"image": "busybox", "cpus": 1, "memory_mb": 64, "gpus": 0, "time_limit_s": 12}
# Writes outputs, then runs past its time limit: killed, then its outputs are collected.
COMMAND = json.dumps(
    ["sh", "-c", "i=0; while [ $i -lt 40 ]; do echo $i > /output/f$i.txt; i=$((i+1)); done; sleep 300"]
)


def test_a_team_whose_budget_is_one_jobs_worst_case_runs_it_to_its_limit_within_the_budget(stack, api, team, settings):
    worst = api.post("/api/v1/jobs/estimate/", ASKED, format="json").json()
    assert (worst["held_seconds"], worst["core_hours"]) == (12 + settings.E31_HOLD_OVERHEAD_S, "0.020000")
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("0.02"))
    declared = {**{k: str(v) for k, v in ASKED.items()}, "name": "to its limit", "command": COMMAND}

    admitted = api.post("/api/v1/jobs/", declared, format="multipart")
    refused = api.post("/api/v1/jobs/", {**declared, "name": "one more"}, format="multipart")

    assert admitted.status_code == 201, admitted.content
    assert admitted.json()["estimated_cost"]["core_hours"] == "0.020000"
    assert refused.status_code == 402 and refused.json()["code"] == "over_budget"
    job = wait_for_release(Job.objects.get(pk=admitted.json()["id"]))
    assert job.outcome == Outcome.TIMED_OUT, job.reason
    assert OutputFile.objects.filter(job=job).count() == 40
    record = Record.objects.get(job=job)
    # Held past its time limit (the start, the kill, collection, the release), as the worst case said.
    assert 12 < record.held_seconds <= 12 + settings.E31_HOLD_OVERHEAD_S
    spent = budgets.spent(team.pk, budgets.month_of(timezone.now()), BudgetUnit.CORE_HOURS)
    assert spent <= Decimal("0.02")

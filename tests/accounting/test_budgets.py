"""Budgets: a submission that would pass the team's month is refused (API: over_budget with the numbers;
the form: the same in words); 80% warns on the team's pages; an operator's extension lets it through."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import timezone

from accounting import budgets
from accounting.budgets import OverBudget
from accounting.models import Budget, BudgetExtension, BudgetUnit
from jobs.lifecycle.actions import cancel
from jobs.models import Job, Outcome
from jobs.submit import service as submission
from tests.factories import RuntimeImageFactory, submit_job
from tests.jobs.test_submission import stored_files

JOBS = "/api/v1/jobs/"


@pytest.fixture(autouse=True)
def _rates(one_per_core_hour, db):
    # No overhead past the time limit (its tests set one): worst cases are easy to read.
    RuntimeImageFactory(name="busybox")


def declared(**changes) -> dict:
    form = {"name": "n", "image": "busybox", "command": "true", "cpus": "2", "memory_mb": "64", "time_limit_s": "3600"}
    return {**form, **changes}


def test_a_submission_past_the_budget_is_refused_with_the_numbers(api, member, team):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("5.00"))
    submit_job(member, team, cpus=2, time_limit_s=3600)  # waiting: up to 2.00

    response = api.post(JOBS, declared(cpus="4"), format="multipart")  # up to 4.00: 6.00 > 5.00

    assert response.status_code == 402
    body = response.json()
    assert body["code"] == "over_budget"
    assert {k: body[k] for k in ("team", "unit", "currency", "budget", "spent", "committed", "estimate", "total")} == {
        "team": "red", "unit": "money", "currency": "EUR", "budget": "5.00", "spent": "0.00", "committed": "2.00",
        "estimate": "4.00", "total": "6.00",
    }  # fmt: skip
    assert "Over budget" in body["detail"] and "6.00 EUR" in body["detail"]
    assert Job.objects.count() == 1


def test_a_submission_past_the_budget_leaves_none_of_its_files_in_the_store(api, team):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("1.00"))

    response = api.post(JOBS, declared(data=SimpleUploadedFile("a.csv", b"1,2\n")), format="multipart")

    assert response.status_code == 402 and not Job.objects.exists()
    assert stored_files() == []


def test_a_submission_within_the_budget_goes_through(api, team):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("5.00"))

    response = api.post(JOBS, declared(cpus="5"), format="multipart")

    assert response.status_code == 201  # exactly 5.00
    assert (response.json()["id"], response.json()["request"]["cpus"]) == (str(Job.objects.get(cpus=5).pk), 5)


def test_what_was_spent_this_month_counts(api, member, team, released):
    # A record released now (released' default instant is in March 2026: use this month instead).
    now = timezone.now()
    released(member, team, held_at=now - timedelta(hours=1), held_for=timedelta(minutes=30), cpus=4)  # 2.00
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("3.00"))

    response = api.post(JOBS, declared(cpus="2"), format="multipart")

    assert response.status_code == 402 and response.json()["spent"] == "2.00"


@pytest.mark.parametrize("unit", [BudgetUnit.MONEY, BudgetUnit.CORE_HOURS])
def test_a_preempted_attempt_is_not_spent(api, member, team, released, unit):
    now = timezone.now()
    preempted = released(member, team, held_at=now - timedelta(hours=2), held_for=timedelta(hours=1), cpus=4,
                         outcome=Outcome.PREEMPTED)  # 4.00 (4 core-hours) had it been charged  # fmt: skip
    cancel(preempted.job, now=now)  # requeued, its next attempt's worst case would count: it is not this test's
    released(member, team, held_at=now - timedelta(hours=1), held_for=timedelta(minutes=30), cpus=2)  # 1.00
    Budget.objects.create(team=team, unit=unit, monthly=Decimal("3.00"))

    response = api.post(JOBS, declared(cpus="2"), format="multipart")  # 2.00: 3.00 in all

    assert response.status_code == 201, response.content
    assert budgets.spent(team.pk, budgets.month_of(now), unit) == Decimal(1)


def test_a_core_hour_budget_counts_held_core_hours(api, member, team):
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("10"))
    submit_job(member, team, cpus=3, time_limit_s=7200)  # 6 core-hours

    refused = api.post(JOBS, declared(cpus="5"), format="multipart")  # 5 more: 11 > 10
    allowed = api.post(JOBS, declared(cpus="4"), format="multipart")  # 4 more: 10

    assert refused.status_code == 402 and refused.json()["unit"] == "core_hours"
    assert refused.json()["committed"] == "6.00" and refused.json()["estimate"] == "5.00"
    assert allowed.status_code == 201


def test_an_extension_lets_the_job_through_and_is_recorded(api, member, team, operator):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("1.00"))
    assert api.post(JOBS, declared(cpus="2"), format="multipart").status_code == 402

    budgets.extend(team, amount=Decimal("1.50"), reason="end of quarter run", by=operator, now=timezone.now())

    assert api.post(JOBS, declared(cpus="2"), format="multipart").status_code == 201
    extension = BudgetExtension.objects.get()
    assert (extension.granted_by, extension.reason, extension.month.day) == (operator, "end of quarter run", 1)


def test_an_operator_grants_an_extension_in_the_admin(client, operator, team):
    client.force_login(operator)
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("1.00"))
    month = budgets.month_of(timezone.now())

    response = client.post(
        "/admin/accounting/budgetextension/add/",
        {"team": team.pk, "month": month.isoformat(), "amount": "3.00", "reason": "deadline"},
    )

    assert response.status_code == 302
    extension = BudgetExtension.objects.get()
    assert extension.granted_by == operator and extension.amount == Decimal("3.00")
    assert client.post(f"/admin/accounting/budgetextension/{extension.pk}/delete/", {"post": "yes"}).status_code == 403


def test_the_form_says_the_same_in_words(client, member, team):
    client.force_login(member)
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("1.00"))

    response = client.post("/jobs/new/", {**declared(cpus="3"), "submission": "a" * 32})

    assert response.status_code == 402
    text = response.content.decode()
    assert (
        "Over budget: team red" in text
        and "this job up to 3.00 EUR" in text
        and "2.00 EUR more than the budget" in text
    )
    assert Job.objects.count() == 0


@pytest.mark.parametrize("page", ["/", "/jobs/", "/jobs/new/", "/usage/"])
def test_at_80_percent_the_team_pages_warn(client, member, team, page):
    client.force_login(member)
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("10.00"))
    submit_job(member, team, cpus=7, time_limit_s=3600)
    quiet = client.get(page).content.decode()
    submit_job(member, team, cpus=1, time_limit_s=3600)  # 8.00 of 10.00

    warned = client.get(page).content.decode()

    assert "budget-warning" not in quiet
    assert "budget-warning" in warned and "has used 80 % of its budget" in warned


def test_another_teams_budget_is_not_shown(client, outsider, member, team):
    client.force_login(outsider)
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("1.00"))
    submit_job(member, team, cpus=1, time_limit_s=3600)

    assert "budget-warning" not in client.get("/").content.decode()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks")
def test_submissions_at_once_never_pass_the_budget_together(transactional_db, member, team, monkeypatch):

    monkeypatch.setattr(submission, "request_schedule", lambda: None)
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("3.00"))  # room for 3 jobs of 1.00
    start, refused, errors = threading.Barrier(8), [], []

    def submit_one(i: int) -> None:
        try:
            start.wait()
            submit_job(member, team, name=f"job {i}", cpus=1, time_limit_s=3600)
        except OverBudget:
            refused.append(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit_one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert errors == [] and len(refused) == 5
    assert Job.objects.filter(team=team).count() == 3

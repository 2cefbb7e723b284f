"""Operators' actions leave a row naming who acted: a node's drain and resume (NodeStateChange), a
cancel of another team's job (its JobEvent), a budget or rate change in the admin (the row itself where
it keeps who, and Django's admin log, LogEntry, for every change)."""

from datetime import timedelta
from decimal import Decimal

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.utils import timezone

from accounting.models import Budget, BudgetUnit, RateCard
from jobs.models import JobEvent, Outcome, Stage
from pool.models import Node, NodeStateChange
from pool.nodes import Capacity, register
from tests.factories import submit_job


def test_draining_and_resuming_a_node_name_the_operator(client, operator):
    node = register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=timezone.now())
    client.force_login(operator)

    client.post("/admin/pool/node/", {"action": "drain", "_selected_action": [node.pk]})
    client.post("/admin/pool/node/", {"action": "resume", "_selected_action": [node.pk]})

    changes = NodeStateChange.objects.filter(node=node).order_by("at", "id")
    assert [(c.to_state, c.by) for c in changes] == [(Node.State.DRAINING, operator), (Node.State.ACTIVE, operator)]


def test_an_operator_cancelling_a_teams_job_in_the_admin_is_in_its_history(client, operator, member, team):
    job = submit_job(member, team)
    client.force_login(operator)

    client.post("/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [job.pk]})

    event = JobEvent.objects.filter(job=job).last()
    assert (event.stage, event.outcome, event.actor, event.actor_user) == (
        Stage.RELEASE, Outcome.CANCELLED, "olga", operator,
    )  # fmt: skip


def test_a_budget_change_in_the_admin_names_the_operator_and_the_field(client, operator, team):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("5.00"))
    client.force_login(operator)

    response = client.post(
        f"/admin/accounting/budget/{team.pk}/change/", {"team": team.pk, "unit": "money", "monthly": "50.00"}
    )

    assert response.status_code == 302, response.content
    assert Budget.objects.get(team=team).monthly == Decimal("50.00")
    entry = LogEntry.objects.get(object_id=str(team.pk), content_type__model="budget")
    assert (entry.user, entry.action_flag) == (operator, CHANGE)
    assert "Monthly" in entry.get_change_message()


def test_a_new_rate_in_the_admin_names_the_operator(client, operator):
    starts = timezone.localtime() + timedelta(days=1)
    client.force_login(operator)

    response = client.post(
        "/admin/accounting/ratecard/add/",
        {"effective_from_0": starts.strftime("%Y-%m-%d"), "effective_from_1": starts.strftime("%H:%M:%S"),
         "runtime_image": "", "core_hour": "0.10", "gb_hour": "0.01", "gpu_hour": "1.00", "note": "winter"},
    )  # fmt: skip

    assert response.status_code == 302, response.content
    rate = RateCard.objects.get(note="winter")
    assert rate.created_by == operator
    entry = LogEntry.objects.get(object_id=str(rate.pk), content_type__model="ratecard")
    assert (entry.user, entry.action_flag) == (operator, ADDITION)

"""The receivers: one outbox row per ending, for the person who asked for that outcome, none when mail is off."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.models import BudgetUnit, BudgetWarning
from accounting.signals import budget_crossed
from jobs.lifecycle import actions
from jobs.models import JobArray, Outcome, Stage
from jobs.signals import array_released, job_released
from notify import outbox
from notify.models import Mail, Preference
from notify.preferences import set_preferences
from tests.conftest import SENT
from tests.factories import JobArrayFactory, RuntimeImageFactory, array_tasks, ended_job, member_of, submit_job

AT = datetime(2026, 3, 10, 3, 0, tzinfo=UTC)


def test_a_failed_job_writes_one_mail_to_its_submitter(alice, team, local_node, mail_on):
    job = ended_job(alice, team, outcome=Outcome.FAILED, at=AT, exit_code=3)

    mail = Mail.objects.get()
    assert (mail.kind, mail.user, mail.job, mail.key) == ("job", alice, job, f"job:{job.pk}:1:{alice.pk}")
    assert (mail.subject, mail.body, mail.sent_at, mail.created_at) == ("", "", None, AT)


def test_success_is_not_mailed_by_default_but_when_asked(alice, team, local_node, mail_on):
    ended_job(alice, team, outcome=Outcome.SUCCEEDED, at=AT)
    assert not Mail.objects.exists()

    set_preferences(alice, email_on=["succeeded"], digest=True, digest_hour=7)
    ended_job(alice, team, outcome=Outcome.SUCCEEDED, at=AT)
    ended_job(alice, team, outcome=Outcome.FAILED, at=AT)
    assert list(Mail.objects.values_list("job__outcome", flat=True)) == ["succeeded"]


def test_a_repeated_release_writes_no_second_mail(alice, team, local_node, mail_on, django_capture_on_commit_callbacks):
    job = ended_job(alice, team, outcome=Outcome.FAILED, at=AT)

    with django_capture_on_commit_callbacks() as kicks:
        job_released.send(sender=type(job), job=job)  # a second delivery of the same ending
        assert outbox.job_ended(job, now=AT) is None
    with pytest.raises(actions.InvalidTransition):
        actions.release(job, outcome=Outcome.FAILED, reason="again", now=AT, attempt=job.attempt)

    assert Mail.objects.count() == 1
    assert kicks == []  # nothing new to send


def test_a_cancelled_job_is_mailed_once(alice, team, local_node, mail_on):
    job = submit_job(alice, team)
    actions.cancel(job, now=AT, acting_user=alice)
    actions.cancel(job, now=AT, acting_user=alice)

    assert list(Mail.objects.values_list("key", flat=True)) == [f"job:{job.pk}:1:{alice.pk}"]


def test_the_kick_goes_out_after_commit(alice, team, local_node, mail_on, django_capture_on_commit_callbacks):
    SENT.clear()
    with django_capture_on_commit_callbacks(execute=True):
        ended_job(alice, team, outcome=Outcome.FAILED, at=AT)

    assert ("notify.send", None, None) in SENT


def test_mail_off_writes_nothing(alice, team, local_node, mail_off):
    ended_job(alice, team, outcome=Outcome.FAILED, at=AT)

    assert not Mail.objects.exists()


def test_a_person_without_an_address_gets_nothing(member, team, local_node, mail_on):
    ended_job(member, team, outcome=Outcome.FAILED, at=AT)

    assert not Mail.objects.exists()


def test_unsubscribed_gets_nothing(alice, team, local_node, mail_on):
    Preference.objects.create(user=alice, email_on=[], digest=False)
    ended_job(alice, team, outcome=Outcome.FAILED, at=AT)

    assert not Mail.objects.exists()


def test_an_array_is_mailed_once_by_its_worst_outcome_its_tasks_never(alice, team, mail_on):
    array = JobArrayFactory(team=team, submitted_by=alice)
    image = RuntimeImageFactory()
    tasks = array_tasks(array, image, [(Stage.RELEASE, Outcome.SUCCEEDED), (Stage.RELEASE, Outcome.FAILED)], at=AT)
    for task in tasks:
        job_released.send(sender=type(task), job=task)
    assert not Mail.objects.exists()

    array_released.send(sender=JobArray, array=array, at=AT)
    array_released.send(sender=JobArray, array=array, at=AT)

    mail = Mail.objects.get()
    assert (mail.kind, mail.array, mail.key) == ("array", array, f"array:{array.pk}:{alice.pk}")


def test_an_array_that_succeeded_is_not_mailed_by_default(alice, team, mail_on):
    array = JobArrayFactory(team=team, submitted_by=alice)
    image = RuntimeImageFactory()
    array_tasks(array, image, [(Stage.RELEASE, Outcome.SUCCEEDED)] * 3, at=AT)

    array_released.send(sender=JobArray, array=array, at=AT)

    assert not Mail.objects.exists()


def test_an_arrays_outcome_is_its_most_telling_end():
    assert outbox.array_outcome({"succeeded": 5, "cancelled": 1}) == "cancelled"
    assert outbox.array_outcome({"succeeded": 5, "cancelled": 1, "timed_out": 1}) == "timed_out"
    assert outbox.array_outcome({"succeeded": 5}) == "succeeded"


def test_a_budget_warning_goes_to_each_member_who_takes_the_digest(alice, teammate, outsider, team, mail_on):
    bob = teammate
    bob.email = "bob@e31.example"
    bob.save(update_fields=["email"])
    outsider.email = "eve@e31.example"
    outsider.save(update_fields=["email"])
    carol = member_of(team, "carol")
    carol.email = "carol@e31.example"
    carol.save(update_fields=["email"])
    set_preferences(carol, email_on=["failed"], digest=False, digest_hour=7)
    warning = BudgetWarning.objects.create(
        team=team, month=AT.date().replace(day=1), level=80, unit=BudgetUnit.MONEY, spent=Decimal("80.5"),
        limit=Decimal("100.00"), at=AT,
    )  # fmt: skip

    budget_crossed.send(sender=BudgetWarning, warning=warning)
    budget_crossed.send(sender=BudgetWarning, warning=warning)

    mails = list(Mail.objects.order_by("key"))
    assert [m.user.username for m in mails] == ["alice", "bob"]
    assert mails[0].key == f"budget:{team.pk}:2026-03:80:{alice.pk}"
    assert mails[0].subject == "budget: team red at 80% of 100.00 EUR (March)"
    assert "80.50 EUR of 100.00 EUR" in mails[0].body and mails[0].kind == "budget"


def test_a_budget_warning_with_mail_off_writes_nothing(alice, team, mail_off):
    warning = BudgetWarning.objects.create(
        team=team, month=AT.date().replace(day=1), level=100, unit=BudgetUnit.CORE_HOURS, spent=Decimal("12"),
        limit=Decimal("10"), at=timezone.now() - timedelta(minutes=1),
    )  # fmt: skip

    budget_crossed.send(sender=BudgetWarning, warning=warning)

    assert not Mail.objects.exists()


def test_a_budget_warning_nudges_the_sender_once(alice, teammate, team, mail_on, django_capture_on_commit_callbacks):
    teammate.email = "bob@e31.example"
    teammate.save(update_fields=["email"])
    warning = BudgetWarning.objects.create(
        team=team, month=AT.date().replace(day=1), level=100, unit=BudgetUnit.MONEY, spent=Decimal("100"),
        limit=Decimal("100.00"), at=AT,
    )  # fmt: skip

    with django_capture_on_commit_callbacks() as kicks:
        budget_crossed.send(sender=BudgetWarning, warning=warning)

    assert Mail.objects.count() == 2 and len(kicks) == 1

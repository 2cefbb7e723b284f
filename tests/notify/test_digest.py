"""The morning digest: due at the person's hour in their team's zone, once a day even with two passes at once,
failures first, arrays as counts, pipelines with the step that broke, schedule runs not submitted, cost and
budget; none when nothing ended, nor for whoever turned it off, has no address, or when mail is off; and one
digest through a real SMTP server on loopback."""

import threading
import zoneinfo
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from accounting.models import Budget, BudgetUnit
from jobs.models import Dependency, Outcome, Stage
from notify import digest
from notify.digest import due_people, mail_key, prepare
from notify.models import Mail, Preference
from notify.sending import send_waiting
from notify.tasks import prepare_digests
from schedules.models import RunStatus
from tests.conftest import SENT
from tests.factories import (
    JobArrayFactory,
    RuntimeImageFactory,
    array_tasks,
    digest_reader,
    ended_job,
    schedule_run_of,
)
from tests.workers import concurrently

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
# 2030-03-12: New York keeps summer time (UTC-4) since the 10th, Paris not yet (UTC+1).
SEVEN_PARIS = datetime(2030, 3, 12, 7, 0, tzinfo=PARIS)
SEVEN_NEW_YORK = datetime(2030, 3, 12, 7, 0, tzinfo=NEW_YORK)
EVENING = datetime(2030, 3, 11, 20, 0, tzinfo=PARIS)
SITE = "http://e31.example.test"


@pytest.fixture(autouse=True)
def mail_on(settings):
    settings.EMAIL_HOST = "127.0.0.1"
    settings.E31_SITE_URL = SITE


@pytest.fixture
def image(db):
    return RuntimeImageFactory()


def in_zone(team, name: str):
    team.time_zone = name
    team.full_clean()
    team.save(update_fields=["time_zone"])
    return team


@pytest.fixture
def paris(team):
    return in_zone(team, "Europe/Paris")


@pytest.fixture
def new_york(other_team):
    return in_zone(other_team, "America/New_York")


@pytest.fixture
def alice(paris):
    return digest_reader(paris, "alice")


def failed(user, team, name: str = "prepare", *, hours: float = 2, **extra):
    extra.setdefault("exit_code", 2)
    extra.setdefault("reason", "exit code 2")
    return ended_job(user, team, outcome=Outcome.FAILED, at=EVENING + timedelta(hours=hours), name=name, **extra)


def succeeded(user, team, name: str, *, hours: float = 1):
    return ended_job(user, team, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=hours), name=name)


def digests() -> list[Mail]:
    return list(Mail.objects.filter(kind=Mail.Kind.DIGEST).order_by("user_id", "created_at"))


def the_digest(user, now=SEVEN_PARIS) -> Mail:
    assert prepare(now=now) >= 1
    return Mail.objects.get(kind=Mail.Kind.DIGEST, user=user)


# --- when -------------------------------------------------------------------------------------------------


def test_the_digest_is_due_at_seven_in_each_teams_own_zone(alice, new_york):
    eve = digest_reader(new_york, "eve")
    assert due_people(now=SEVEN_PARIS - timedelta(minutes=1)) == []
    assert [d.user_id for d in due_people(now=SEVEN_PARIS)] == [alice.pk]
    assert [d.user_id for d in due_people(now=SEVEN_NEW_YORK - timedelta(minutes=1))] == [alice.pk]
    due = due_people(now=SEVEN_NEW_YORK)
    assert [d.user_id for d in due] == [alice.pk, eve.pk]
    assert [d.day.isoformat() for d in due] == ["2030-03-12", "2030-03-12"]


def test_a_chosen_hour_is_read_in_the_teams_zone(alice):
    Preference.objects.create(user=alice, digest_hour=9)
    assert due_people(now=SEVEN_PARIS + timedelta(hours=1, minutes=59)) == []
    assert [d.user_id for d in due_people(now=SEVEN_PARIS + timedelta(hours=2))] == [alice.pk]


def test_the_hour_is_kept_across_a_change_to_summer_time(alice):
    """Paris moves to summer time on 2030-03-31: 07:00 is then 05:00 UTC, not 06:00."""
    summer = datetime(2030, 3, 31, 7, 0, tzinfo=PARIS)
    assert summer.utcoffset() == timedelta(hours=2)
    assert due_people(now=summer - timedelta(minutes=1)) == []
    assert [d.user_id for d in due_people(now=summer)] == [alice.pk]


def test_someone_in_several_teams_gets_one_digest_by_the_clock_of_their_first_team(
    alice, paris, new_york, image, local_node
):
    digest_reader(new_york, "alice")  # blue (New York) comes before red (Paris) by slug
    failed(alice, paris, "red job")
    failed(alice, new_york, "blue job")
    assert prepare(now=SEVEN_PARIS) == 0
    mail = the_digest(alice, now=SEVEN_NEW_YORK)
    assert "[blue] blue job" in mail.body and "[red] red job" in mail.body
    assert mail.key == f"digest:{alice.pk}:2030-03-12"
    assert prepare(now=SEVEN_NEW_YORK + timedelta(hours=5)) == 0


def test_the_pass_runs_on_the_clock_of_the_task(alice, image, local_node, django_capture_on_commit_callbacks):
    failed(alice, alice.teams.get())
    SENT.clear()
    with time_machine.travel(SEVEN_PARIS - timedelta(seconds=1), tick=False):
        assert prepare_digests() == 0
    with time_machine.travel(SEVEN_PARIS, tick=False), django_capture_on_commit_callbacks(execute=True):
        assert prepare_digests() == 1
    assert ("notify.send", None, None) in SENT  # the sender is nudged once the digest is committed


# --- once a day -------------------------------------------------------------------------------------------


def test_one_digest_a_day_covering_what_ended_since_the_last(alice, paris, image, local_node):
    first = failed(alice, paris, "first")
    assert prepare(now=SEVEN_PARIS) == 1
    again = failed(alice, paris, "second", hours=12)  # 08:00, after the digest
    assert prepare(now=SEVEN_PARIS + timedelta(minutes=1)) == 0
    Preference.objects.filter(user=alice).update(digest_hour=9)  # a later hour the same day: still one
    assert prepare(now=SEVEN_PARIS + timedelta(hours=3)) == 0
    Preference.objects.filter(user=alice).update(digest_hour=7)
    assert prepare(now=SEVEN_PARIS + timedelta(days=1)) == 1
    one, two = digests()
    assert str(first.pk) in one.body and str(again.pk) not in one.body
    assert str(again.pk) in two.body and str(first.pk) not in two.body
    assert two.key == mail_key(alice.pk, (SEVEN_PARIS + timedelta(days=1)).date())
    # Up to a minute before the pass: a release stamped before that has committed (digest.SETTLE).
    assert Preference.objects.get(user=alice).digested_until == SEVEN_PARIS + timedelta(days=1) - digest.SETTLE


def test_a_first_digest_covers_the_last_24_hours(alice, paris, image, local_node):
    old = ended_job(alice, paris, outcome=Outcome.FAILED, at=SEVEN_PARIS - timedelta(hours=25), name="old")
    new = failed(alice, paris, "new")
    body = the_digest(alice).body
    assert str(new.pk) in body and str(old.pk) not in body


def test_a_digest_turned_back_on_covers_the_last_week_at_most(alice, paris, image, local_node):
    Preference.objects.create(user=alice, digested_until=SEVEN_PARIS - timedelta(days=40))
    old = ended_job(alice, paris, outcome=Outcome.FAILED, at=SEVEN_PARIS - timedelta(days=8), name="old")
    week = ended_job(alice, paris, outcome=Outcome.FAILED, at=SEVEN_PARIS - timedelta(days=6), name="this week")
    mail = the_digest(alice)
    assert str(week.pk) in mail.body and str(old.pk) not in mail.body
    assert mail.subject.endswith("since 2030-03-05 07:00")


def test_a_release_stamped_just_before_a_pass_is_in_the_next_digest(alice, paris, image, local_node):
    # Stamped 30 s before the pass, its transaction may commit after the pass read: the next digest has it.
    late = ended_job(alice, paris, outcome=Outcome.FAILED, at=SEVEN_PARIS - timedelta(seconds=30), name="late")
    assert prepare(now=SEVEN_PARIS) == 0
    assert prepare(now=SEVEN_PARIS + timedelta(days=1)) == 1
    assert str(late.pk) in digests()[0].body


def test_nothing_ended_means_no_mail_but_the_day_is_done(alice):
    assert prepare(now=SEVEN_PARIS) == 0
    assert digests() == []
    kept = Preference.objects.get(user=alice)
    assert kept.digest_day.isoformat() == "2030-03-12" and kept.digested_until == SEVEN_PARIS - digest.SETTLE
    assert due_people(now=SEVEN_PARIS + timedelta(minutes=1)) == []


@pytest.mark.parametrize("why", ["digest off", "no address", "mail off", "left the site"])
def test_no_digest_for(why, alice, paris, image, local_node, settings):
    failed(alice, paris)
    if why == "digest off":
        Preference.objects.create(user=alice, digest=False)
    elif why == "no address":
        alice.email = ""
        alice.save(update_fields=["email"])
    elif why == "mail off":
        settings.EMAIL_HOST = ""
    else:
        alice.is_active = False
        alice.save(update_fields=["is_active"])
    assert prepare(now=SEVEN_PARIS) == 0
    assert digests() == []


def test_one_team_whose_report_breaks_stops_no_other_digest(alice, paris, new_york, image, local_node, monkeypatch):
    eve = digest_reader(new_york, "eve")
    failed(alice, paris, "red job")
    failed(eve, new_york, "blue job")
    real = digest.report_of

    def broken_for_paris(team, **kwargs):
        if team.pk == paris.pk:
            raise RuntimeError("a bug")
        return real(team, **kwargs)

    monkeypatch.setattr(digest, "report_of", broken_for_paris)
    assert prepare(now=SEVEN_NEW_YORK) == 1  # eve's; alice's waits for a pass that can write it
    assert [m.user for m in digests()] == [eve]
    monkeypatch.undo()
    assert prepare(now=SEVEN_NEW_YORK + timedelta(minutes=1)) == 1
    assert {m.user for m in digests()} == {alice, eve}


def test_someone_in_no_team_gets_none(db, django_user_model):
    django_user_model.objects.create(username="loner", email="loner@example.test")
    assert due_people(now=SEVEN_PARIS) == []


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_write_each_digest_once(alice, paris, image, local_node, monkeypatch):
    people = [alice, *(digest_reader(paris, name) for name in ("bob", "carol", "dan"))]
    failed(alice, paris)
    # Both passes have read who is due and worded their mails before either claims: the race is the claim's.
    both_ready = threading.Barrier(2, timeout=30)
    claim = digest._claim_and_write

    def claim_together(*args, **kwargs):
        both_ready.wait()
        return claim(*args, **kwargs)

    monkeypatch.setattr(digest, "_claim_and_write", claim_together)
    written: list[int] = []

    def one_pass():
        written.append(prepare(now=SEVEN_PARIS))

    errors = concurrently(one_pass, one_pass)
    assert not errors, errors
    assert sorted(written)[-1] + sorted(written)[0] == len(people)
    assert sorted(m.user_id for m in digests()) == sorted(p.pk for p in people)


def test_the_key_is_the_last_guard_when_the_day_was_lost(alice, paris, image, local_node):
    failed(alice, paris)
    assert prepare(now=SEVEN_PARIS) == 1
    Preference.objects.filter(user=alice).update(digest_day=None)
    assert prepare(now=SEVEN_PARIS + timedelta(minutes=1)) == 0
    assert len(digests()) == 1


# --- what it says -----------------------------------------------------------------------------------------


def test_failures_come_first_with_exit_code_reason_and_link(alice, paris, image, local_node):
    broke = failed(alice, paris, "prepare", exit_code=2, reason="exit code 2")
    oom = ended_job(alice, paris, outcome=Outcome.OUT_OF_MEMORY, at=EVENING + timedelta(hours=3), name="train",
                    reason="used more than its 64 MB")  # fmt: skip
    for name in ("etl", "etl", "report"):
        succeeded(alice, paris, name)
    ended_job(alice, paris, outcome=Outcome.CANCELLED, at=EVENING, ran=timedelta(0), name="oops")
    mail = the_digest(alice)
    assert mail.subject == "E31 digest: 2 failed, 3 succeeded since 2030-03-11 07:00"
    body = mail.body
    assert body.index("FAILED (2)") < body.index("SUCCEEDED (3)") < body.index("CANCELLED (1)")
    assert body.index("train at 2030-03-11 23:00") < body.index("prepare at 2030-03-11 22:00")  # the latest first
    assert f"prepare at 2030-03-11 22:00\n  failed, exit code 2: exit code 2\n  {SITE}/jobs/{broke.pk}/\n" in body
    assert f"train at 2030-03-11 23:00\n  out of memory: used more than its 64 MB\n  {SITE}/jobs/{oom.pk}/\n" in body
    assert "- etl ×2, report\n" in body
    assert f"The review: {SITE}/?since=2030-03-11T07%3A00%3A00%2B01%3A00" in body
    assert mail.kind == "digest" and mail.user == alice and mail.sent_at is None


def test_the_lists_are_bounded_and_say_how_many_more(alice, paris, image, local_node, monkeypatch):
    from notify import digest_report

    monkeypatch.setattr(digest_report, "FAILURES_SHOWN", 2)
    monkeypatch.setattr(digest_report, "NAMES_SHOWN", 1)
    for i in range(3):
        failed(alice, paris, f"broke {i}", hours=i / 10)
    for name in ("a", "b", "b"):
        succeeded(alice, paris, name)
    body = the_digest(alice).body
    assert "FAILED (3)" in body and body.count("  failed, exit code 2") == 2 and "… and 1 more in red" in body
    assert "- b ×2 and 1 more\n" in body


def array_at(member, team, image, name: str, states, *, hours: int):
    array = JobArrayFactory(team=team, submitted_by=member, name=name, submitted_at=EVENING)
    array_tasks(array, image, states, at=EVENING + timedelta(hours=hours))
    return array


OK_TASK, FAILED_TASK, CANCELLED_TASK = (
    (Stage.RELEASE, Outcome.SUCCEEDED),
    (Stage.RELEASE, Outcome.FAILED),
    (Stage.RELEASE, Outcome.CANCELLED),
)


def test_an_array_is_counts_per_outcome_not_a_line_per_task(alice, paris, image):
    sweep = array_at(alice, paris, image, "lr sweep", [OK_TASK] * 17 + [FAILED_TASK] * 3, hours=2)
    array_at(alice, paris, image, "fine sweep", [OK_TASK] * 4, hours=3)
    mail = the_digest(alice)
    assert mail.subject == "E31 digest: 1 failed, 1 succeeded since 2030-03-11 07:00"
    assert "- lr sweep [20 tasks]: 3 failed, 17 succeeded\n" in mail.body
    assert f"  {SITE}/arrays/{sweep.pk}/\n" in mail.body
    assert "- fine sweep [4 tasks]: 4 succeeded\n" in mail.body
    assert mail.body.index("lr sweep") < mail.body.index("fine sweep")
    assert "lr sweep[" not in mail.body and "FAILED (" not in mail.body


def test_a_pipeline_names_the_step_that_broke_and_what_was_cancelled(alice, paris, image, local_node):
    prepare_job = failed(alice, paris, "prepare", hours=1)
    train = array_at(alice, paris, image, "train", [CANCELLED_TASK] * 4, hours=1)
    evaluate = ended_job(alice, paris, outcome=Outcome.CANCELLED, at=EVENING + timedelta(hours=1), ran=timedelta(0),
                         name="evaluate")  # fmt: skip
    Dependency.objects.bulk_create([
        Dependency(array=train, on_job=prepare_job, kind=Dependency.Kind.OK),
        Dependency(job=evaluate, on_array=train, kind=Dependency.Kind.OK),
    ])  # fmt: skip
    mail = the_digest(alice)
    assert mail.subject.startswith("E31 digest: 1 failed, 0 succeeded")
    assert "- prepare → train → evaluate: broke at prepare (failed, exit code 2: exit code 2)\n" in mail.body
    assert "  cancelled after it: train, evaluate\n" in mail.body
    assert f"  {SITE}/jobs/{prepare_job.pk}/\n" in mail.body
    assert "FAILED (" not in mail.body and "ARRAYS" not in mail.body  # each step once, in its pipeline


def test_missed_and_refused_schedule_runs_are_news_even_when_nothing_ended(alice, paris):
    at = SEVEN_PARIS - timedelta(hours=6)
    schedule_run_of(paris, alice, status=RunStatus.MISSED, reason="the pool was down for 2 h", planned_at=at)
    schedule_run_of(paris, alice, status=RunStatus.REFUSED, reason="Over budget: team red's budget…",
                    planned_at=at + timedelta(hours=1))  # fmt: skip
    schedule_run_of(paris, alice, status=RunStatus.SUBMITTED, reason="", planned_at=at + timedelta(hours=2))
    schedule_run_of(paris, alice, status=RunStatus.MISSED, reason="long ago", planned_at=at - timedelta(days=3))
    mail = the_digest(alice)
    assert mail.subject == "E31 digest: 0 failed, 0 succeeded, 2 schedule runs not submitted since 2030-03-11 07:00"
    assert "SCHEDULE RUNS NOT SUBMITTED (2)\n" in mail.body
    assert "- nightly at 2030-03-12 01:00: missed, the pool was down for 2 h\n" in mail.body
    assert "- nightly at 2030-03-12 02:00: refused, Over budget: team red's budget…\n" in mail.body
    assert "long ago" not in mail.body


def test_the_cost_since_the_last_digest_and_the_budget_left(alice, paris, image, local_node, settings):
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR = Decimal("3.00"), Decimal("0")
    Budget.objects.create(team=paris, unit=BudgetUnit.MONEY, monthly=Decimal("100.00"))
    failed(alice, paris, ran=timedelta(minutes=20))  # 1 core × 1/3 h × 3.00 = 1.00
    succeeded(alice, paris, "etl")  # 1 core × 1/6 h (ended_job's 10 minutes) × 3.00 = 0.50
    body = the_digest(alice).body
    assert body.index("SUCCEEDED") < body.index("COST AND BUDGET")
    assert (
        "- 1.50 EUR since the last digest; budget for March 2030: 98.50 EUR left of 100.00 EUR "
        "(1.50 EUR spent, 0.00 EUR committed to jobs not ended)\n"
    ) in body


def test_another_teams_news_is_not_in_my_digest(alice, paris, new_york, image, local_node):
    eve = digest_reader(new_york, "eve")
    failed(eve, new_york, "secret")
    failed(alice, paris, "mine")
    body = the_digest(alice).body
    assert "mine" in body and "secret" not in body


def test_a_pass_reads_a_team_once_whatever_its_members(
    alice, paris, new_york, image, local_node, django_assert_max_num_queries
):
    for i in range(12):
        digest_reader(paris, f"member{i}")
        digest_reader(new_york, f"other{i}")
    failed(alice, paris)
    succeeded(alice, paris, "etl")
    sweep_at = array_at(alice, paris, image, "sweep", [OK_TASK, FAILED_TASK], hours=1)
    schedule_run_of(paris, alice, status=RunStatus.MISSED, reason="down", planned_at=SEVEN_PARIS - timedelta(hours=2))
    assert sweep_at
    # Who is due, their rows, the teams (3); the busy team's report (12: outcomes, failures, names, pipelines
    # and arrays 4, runs twice, cost, budget) and the quiet one's (4); the claim (5): 24, whatever the members.
    with django_assert_max_num_queries(24):
        assert prepare(now=SEVEN_NEW_YORK) == 13  # the quiet team's members get none


# --- sent, for real -----------------------------------------------------------------------------------------


def test_the_digest_reaches_a_real_smtp_server(alice, paris, image, local_node, smtp):
    broke = failed(alice, paris, "prepare")
    succeeded(alice, paris, "etl")
    the_digest(alice)
    send_waiting(now=SEVEN_PARIS + timedelta(minutes=1))  # the outbox's own sender (the job's end mail too)
    [message] = [m for m in smtp.messages if m["Subject"].startswith("E31 digest")]
    assert message["To"] == "alice@example.test"
    assert message["Subject"] == "E31 digest: 1 failed, 1 succeeded since 2030-03-11 07:00"
    assert message["From"] == "e31@e31.example"
    assert "/account/notifications/unsubscribe/" in message["List-Unsubscribe"]
    text = message.get_content()
    assert (
        f"/jobs/{broke.pk}/" in text
        and "/account/notifications/unsubscribe/" in text
        and text.index("FAILED (1)") < text.index("SUCCEEDED (1)")
    )

"""The outbox pass against a real SMTP server on loopback (aiosmtpd): what a mail says, its headers, each
sent once, and the backoff when the server refuses."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from accounting.meter import Usage
from accounting.models import Budget, BudgetUnit
from jobs.models import JobArray, Outcome, Stage
from jobs.signals import array_released
from notify import sending
from notify.compose import LOG_LINES
from notify.links import user_of_token
from notify.models import Mail
from notify.sending import GIVE_UP_AFTER, LEASE, next_delay, send_waiting
from notify.tasks import send_mail
from tests.factories import JobArrayFactory, RuntimeImageFactory, array_tasks, ended_job
from tests.notify.conftest import free_port

AT = datetime(2026, 3, 10, 3, 0, tzinfo=UTC)
LOG = b"".join(f"step {i}\n".encode() for i in range(1, 31)) + b"\x1b[31mboom\x1b[0m\n"


pytestmark = pytest.mark.usefixtures("one_per_core_hour")


def text(message) -> str:
    """The body as written: SMTP carries its lines ended with CRLF."""
    return message.get_content().replace("\r\n", "\n")


def unsubscribe_link(message) -> str:
    """The List-Unsubscribe header's link, checked to be the addressee's own."""
    header = str(message["List-Unsubscribe"]).strip()
    assert header.startswith("<") and header.endswith(">"), header
    url = header[1:-1]
    user = User.objects.get(email=message["To"])
    assert user_of_token(url.rstrip("/").rsplit("/", 1)[1]) == user.pk
    return url


def failed_job(user, team):
    return ended_job(
        user, team, outcome=Outcome.FAILED, at=AT, exit_code=3, reason="exited with 3", name="nightly-train",
        waited=timedelta(minutes=2), ran=timedelta(minutes=10), cpus=2, memory_mb=512, log=LOG,
        usage=Usage(cpu_seconds=300.0, memory_peak_mb=128),
    )  # fmt: skip


def test_a_released_job_is_mailed_through_the_smtp_server(alice, team, local_node, smtp):
    job = failed_job(alice, team)

    done = send_waiting(now=AT + timedelta(seconds=5))

    assert (done.sent, done.failed, done.given_up) == (1, 0, 0)
    [message] = smtp.messages
    assert message["Subject"] == f"failed: nightly-train (job {str(job.pk)[:8]})"
    assert message["To"] == "alice@e31.example" and message["From"] == "e31@e31.example"
    url = unsubscribe_link(message)
    assert url.startswith("https://e31.example/account/notifications/unsubscribe/")
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    body = text(message)
    assert "Exit code:  3" in body and "Reason:     exited with 3" in body
    assert "Queued:     2 m 00 s" in body and "Ran:        10 m 00 s" in body
    assert "CPU:        25 % of 2 cpus held" in body  # 300 cpu-s over 600 s on 2 cpus
    assert "Memory:     25 % of 512 MB held" in body
    assert "Cost:       0.33 EUR" in body  # 2 cores for 10 minutes at 1.00 a core-hour
    assert f"https://e31.example{reverse('jobs:detail', args=[job.pk])}" in body
    assert f"Stop all of it: {url}" in body
    quoted = [line[2:] for line in body.splitlines() if line.startswith("  step") or "boom" in line]
    assert len(quoted) == LOG_LINES and quoted[0] == "step 12" and quoted[-1] == "?[31mboom?[0m"
    mail = Mail.objects.get()
    assert mail.sent_at == AT + timedelta(seconds=5) and mail.attempts == 1
    assert mail.subject == message["Subject"]  # what was sent is kept


def test_a_mail_is_sent_once(alice, team, local_node, smtp):
    failed_job(alice, team)

    send_waiting(now=AT)
    send_waiting(now=AT + timedelta(minutes=1))

    assert len(smtp.messages) == 1


def test_the_task_sends_the_waiting_mail(alice, team, local_node, smtp):
    failed_job(alice, team)

    assert send_mail.apply().get() == 1
    assert len(smtp.messages) == 1


def test_an_array_mail_counts_and_names_its_failed_tasks(alice, team, smtp):
    array = JobArrayFactory(team=team, submitted_by=alice, name="sweep")
    states = [(Stage.RELEASE, Outcome.SUCCEEDED)] * 3 + [(Stage.RELEASE, Outcome.FAILED)] * 25
    array_tasks(array, RuntimeImageFactory(), states, at=AT)
    array_released.send(sender=JobArray, array=array, at=AT)

    send_waiting(now=AT)

    [message] = smtp.messages
    assert message["Subject"] == f"failed: sweep (array {str(array.pk)[:8]}, 28 tasks)"
    body = text(message)
    assert "failed: 25" in body and "succeeded: 3" in body
    assert "Failed tasks: 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, …" in body
    assert f"https://e31.example/arrays/{array.pk}/" in body


def test_a_mail_written_by_another_part_is_sent_as_stored_with_the_link(alice, smtp):
    Mail.objects.create(
        key="digest:x", kind="digest", user=alice, subject="digest: 2 failed", body="two.", created_at=AT
    )

    send_waiting(now=AT)

    [message] = smtp.messages
    assert message["Subject"] == "digest: 2 failed"
    assert text(message).startswith("two.\n") and f"Stop all of it: {unsubscribe_link(message)}\n" in text(message)


def test_an_smtp_refusal_backs_off_then_the_mail_is_sent(alice, team, local_node, smtp):
    failed_job(alice, team)
    smtp.refuse = "451 4.3.0 Try again later"

    done = send_waiting(now=AT)

    assert (done.sent, done.failed) == (0, 1) and smtp.refused == 1 and not smtp.messages
    mail = Mail.objects.get()
    assert (mail.attempts, mail.sent_at, mail.given_up) == (1, None, False)
    assert mail.next_attempt_at == AT + timedelta(minutes=1) and "451" in mail.last_error

    send_waiting(now=AT + timedelta(seconds=30))  # not due yet
    assert smtp.refused == 1
    send_waiting(now=AT + timedelta(minutes=1))  # due, refused again: twice as long
    mail.refresh_from_db()
    assert (mail.attempts, mail.next_attempt_at) == (2, AT + timedelta(minutes=3))

    smtp.refuse = ""
    send_waiting(now=AT + timedelta(minutes=3))
    mail.refresh_from_db()
    assert mail.sent_at == AT + timedelta(minutes=3) and mail.attempts == 3 and mail.last_error == ""
    assert len(smtp.messages) == 1


def test_a_server_that_does_not_answer_backs_off(alice, team, local_node, smtp, settings):
    failed_job(alice, team)
    settings.EMAIL_PORT = free_port()  # nobody listens

    send_waiting(now=AT)

    mail = Mail.objects.get()
    assert mail.attempts == 1 and mail.sent_at is None and "Connection refused" in mail.last_error


def test_a_server_that_cannot_be_reached_backs_off_the_whole_batch_and_ends_the_pass(alice, smtp, settings):
    for n in range(3):
        Mail.objects.create(key=f"digest:{n}", kind="digest", user=alice, subject="s", body="b", created_at=AT)
    settings.EMAIL_PORT = free_port()  # nobody listens

    done = send_waiting(now=AT, batch=2)

    assert (done.sent, done.failed, done.unreachable) == (0, 2, True)
    # One connection refused is enough: the batch backs off and the third mail waits for a later pass.
    assert sorted(Mail.objects.values_list("attempts", flat=True)) == [0, 1, 1]


def test_a_mail_claimed_by_a_pass_that_died_is_sent_once_its_lease_ends(alice, smtp):
    mail = Mail.objects.create(key="digest:x", kind="digest", user=alice, subject="s", body="b", created_at=AT)
    Mail.objects.filter(pk=mail.pk).update(next_attempt_at=AT + LEASE)  # as claimed at AT by a pass that died

    assert send_waiting(now=AT + LEASE - timedelta(seconds=1)).sent == 0
    assert send_waiting(now=AT + LEASE).sent == 1

    assert len(smtp.messages) == 1


def test_a_pass_past_its_lease_does_not_overwrite_the_row(alice, smtp, monkeypatch):
    Mail.objects.create(key="digest:x", kind="digest", user=alice, subject="s", body="b", created_at=AT)
    real_send_one = sending._send_one

    def slow(mail, connection, *, now, done):
        # Meanwhile the lease ended and another pass took the row and sent it.
        Mail.objects.filter(pk=mail.pk).update(next_attempt_at=now + 2 * LEASE, last_error="the other pass's")
        real_send_one(mail, connection, now=now, done=done)

    monkeypatch.setattr(sending, "_send_one", slow)
    send_waiting(now=AT)

    assert Mail.objects.get().last_error == "the other pass's" and Mail.objects.get().sent_at is None


def test_it_gives_up_after_a_day(alice, team, local_node, smtp):
    failed_job(alice, team)
    smtp.refuse = "451 4.3.0 Try again later"
    now = AT
    while not Mail.objects.get().given_up:
        send_waiting(now=now)
        now = Mail.objects.get().next_attempt_at
        assert now - AT < GIVE_UP_AFTER + timedelta(hours=1)

    mail = Mail.objects.get()
    assert mail.sent_at is None and "451" in mail.last_error
    smtp.refuse = ""
    send_waiting(now=AT + timedelta(days=2))
    assert not smtp.messages


def test_delays_double_up_to_an_hour():
    assert [next_delay(n) for n in (1, 2, 3, 7, 20)] == [
        timedelta(minutes=1),
        timedelta(minutes=2),
        timedelta(minutes=4),
        timedelta(hours=1),
        timedelta(hours=1),
    ]


def test_a_person_who_lost_their_address_is_given_up(alice, team, local_node, smtp):
    failed_job(alice, team)
    alice.email = ""
    alice.save(update_fields=["email"])

    send_waiting(now=AT)

    mail = Mail.objects.get()
    assert mail.given_up and not smtp.messages


def test_mail_off_sends_nothing(alice, team, local_node, smtp, settings):
    failed_job(alice, team)
    settings.EMAIL_HOST = ""

    assert send_waiting(now=AT).sent == 0
    assert not smtp.messages and Mail.objects.get().attempts == 0


def test_a_release_past_the_budget_mails_the_warning(alice, team, local_node, smtp):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("0.40"))
    failed_job(alice, team)  # costs 0.33: past 80% of 0.40

    send_waiting(now=AT)

    subjects = sorted(m["Subject"] for m in smtp.messages)
    assert subjects == ["budget: team red at 80% of 0.40 EUR (March)", subjects[1]]
    assert subjects[1].startswith("failed: nightly-train")
    assert all(unsubscribe_link(m) for m in smtp.messages)


def test_a_job_cancelled_before_it_ran_is_mailed_without_figures(alice, team, smtp):
    job = ended_job(alice, team, outcome=Outcome.CANCELLED, at=AT, ran=timedelta(0), name="never-ran")

    send_waiting(now=AT)

    [message] = smtp.messages
    assert message["Subject"] == f"cancelled: never-ran (job {str(job.pk)[:8]})"
    body = text(message)
    assert "Exit code:  none" in body and "Cost:       none (never held)" in body and "Its log is empty." in body


def test_a_mail_that_cannot_be_written_backs_off_and_lets_the_others_go(alice, team, local_node, smtp, monkeypatch):
    failed_job(alice, team)
    Mail.objects.create(key="digest:y", kind="digest", user=alice, subject="digest", body="fine.", created_at=AT)
    monkeypatch.setattr("notify.sending.job_mail", lambda job: 1 / 0)

    done = send_waiting(now=AT)

    assert (done.sent, done.failed) == (1, 1)
    assert [m["Subject"] for m in smtp.messages] == ["digest"]
    broken = Mail.objects.get(kind="job")
    assert "ZeroDivisionError" in broken.last_error and broken.next_attempt_at == AT + timedelta(minutes=1)


def test_a_permanent_refusal_is_given_up_at_once(alice, team, local_node, smtp):
    failed_job(alice, team)
    smtp.refuse = "550 5.1.1 No such mailbox"

    done = send_waiting(now=AT)

    mail = Mail.objects.get()
    assert done.given_up == 1 and mail.given_up and mail.attempts == 1 and "550" in mail.last_error

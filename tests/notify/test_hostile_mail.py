"""Mail against a hostile or careless world: a team's job is told only to the team, a subject is one line,
an unsubscribe link works only as made."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.test import Client
from django.urls import reverse

from jobs.lifecycle import actions
from jobs.models import Job, JobArray, Outcome, Stage
from jobs.signals import array_released
from notify.links import unsubscribe_token
from notify.models import Mail, Preference
from notify.sending import send_waiting
from tests.factories import JobArrayFactory, RuntimeImageFactory, array_tasks, submit_job

AT = datetime(2026, 3, 10, 3, 0, tzinfo=UTC)


def leave(user, team) -> None:
    team.membership_set.filter(user=user).delete()


def test_a_job_ending_after_its_submitter_left_the_team_is_not_mailed_to_them(alice, team, other_team, mail_on):
    """Alice moved from red to blue while her red job waited: its end, log and cost are red's, not hers."""
    job = submit_job(alice, team)
    leave(alice, team)
    other_team.membership_set.create(user=alice)

    actions.cancel(job, now=AT)

    assert not Mail.objects.exists()


def test_an_array_ending_after_its_submitter_left_the_team_is_not_mailed_to_them(alice, team, mail_on):
    array = JobArrayFactory(team=team, submitted_by=alice)
    array_tasks(array, RuntimeImageFactory(), [(Stage.RELEASE, Outcome.FAILED)], at=AT)
    leave(alice, team)

    array_released.send(sender=JobArray, array=array, at=AT)

    assert not Mail.objects.exists()


def test_a_job_mail_waiting_when_its_person_left_the_team_is_given_up(alice, team, local_node, smtp):
    job = submit_job(alice, team)
    actions.cancel(job, now=AT)
    leave(alice, team)

    send_waiting(now=AT)

    mail = Mail.objects.get()
    assert (mail.sent_at, mail.given_up, mail.body) == (None, True, "")
    assert "no longer a member of the team red" in mail.last_error
    assert smtp.messages == []


@pytest.mark.parametrize(
    "forge",
    [
        lambda user: unsubscribe_token(user)[:-3] + "abc",  # its signature altered
        lambda user: signing.dumps(user.pk, compress=True),  # signed with the key, for another purpose
        lambda user: signing.dumps(user.pk, salt="notify.unsubscribe", key="not the site's key"),
    ],
    ids=["altered", "another salt", "another key"],
)
def test_an_unsubscribe_token_not_made_for_it_stops_nothing(client, member, forge):
    answer = client.post(f"/account/notifications/unsubscribe/{forge(member)}/")

    assert answer.status_code == 404
    assert not Preference.objects.exists()


def test_the_link_of_a_deleted_account_answers_and_writes_nothing(db):
    """An account deleted since its mail was sent: its link (in an old mail) must not fail with a 500."""
    gone = User.objects.create(username="gone", email="gone@e31.example")
    url, gone_id = reverse("notify:unsubscribe", args=[unsubscribe_token(gone)]), gone.pk
    gone.delete()

    answer = Client(raise_request_exception=False).post(url)

    assert answer.status_code == 200
    assert not Preference.objects.filter(user_id=gone_id).exists()


def test_a_job_name_with_line_breaks_stays_in_one_subject_line(alice, team, local_node, smtp):
    """jobs.names refuses such a name at submission; a row written otherwise (an old one, the admin) must still
    not add a header to the mail."""
    job = submit_job(alice, team)
    Job.objects.filter(pk=job.pk).update(name="nightly\r\nBcc: eve@evil.example\u2028X-Evil: 1")
    actions.cancel(job, now=AT)

    send_waiting(now=AT)

    [message] = smtp.messages
    assert message["Subject"] == f"cancelled: nightly Bcc: eve@evil.example X-Evil: 1 (job {str(job.pk)[:8]})"
    assert message["Bcc"] is None and message["X-Evil"] is None
    assert message["To"] == "alice@e31.example"

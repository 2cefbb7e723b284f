"""The names of the jobs and arrays a reason names by id (jobs.web.upstreams), and the filters that say them
(jobs.templatetags.reasons): a list's reasons named in one query per kind, each only with its own team's names."""

from jobs.templatetags.reasons import upstreams_named, upstreams_named_text
from jobs.web.upstreams import names_of, read_names
from tests.factories import JobArrayFactory, submit_job


def test_every_reason_of_a_list_is_named_in_one_query_per_kind(member, team, image, django_assert_num_queries):
    jobs = [submit_job(member, team, image=image, name=f"extract {i}") for i in range(5)]
    arrays = [JobArrayFactory(team=team, submitted_by=member, name=f"sweep {i}") for i in range(5)]
    reasons = [
        (f"waits for job {j.pk} to succeed, and array {a.pk} to end", team.pk)
        for j, a in zip(jobs, arrays, strict=True)
    ]

    with django_assert_num_queries(2):
        named = names_of([*reasons, ("not seen by a pass", team.pk)])

    assert named[0] == {("job", str(jobs[0].pk)): "extract 0", ("array", str(arrays[0].pk)): "sweep 0"}
    assert named[4] == {("job", str(jobs[4].pk)): "extract 4", ("array", str(arrays[4].pk)): "sweep 4"}
    assert named[5] == {}


def test_a_job_of_another_team_is_named_only_in_its_own_teams_reasons(member, team, outsider, other_team, image):
    theirs = submit_job(outsider, other_team, image=image, name="their secret")
    text = f"waits for job {theirs.pk} to succeed"

    mine, their_own = names_of([(text, team.pk), (text, other_team.pk)])

    assert mine == {("job", str(theirs.pk)): None} and their_own == {("job", str(theirs.pk)): "their secret"}


def test_the_filters_say_each_name_linked_or_quoted_and_another_teams_as_another_job(
    member, team, outsider, other_team, image
):
    upstream = submit_job(member, team, image=image, name="clean <data>")
    theirs = submit_job(outsider, other_team, image=image, name="their secret")
    waiting = submit_job(member, team, image=image, name="train")
    text = f"waits for job {upstream.pk} to succeed, and job {theirs.pk} to end"

    said = upstreams_named(text, waiting)

    assert said == (
        f'waits for job <a href="/jobs/{upstream.pk}/">clean &lt;data&gt;</a> to succeed, and another job to end'
    )
    assert upstreams_named_text(text, waiting) == "waits for job “clean <data>” to succeed, and another job to end"


def test_a_reason_read_for_a_list_is_said_without_a_query_and_any_other_reads_what_it_lacks(
    member, team, image, django_assert_num_queries
):
    upstream = submit_job(member, team, image=image, name="extract")
    other = submit_job(member, team, image=image, name="load")
    waiting = submit_job(member, team, image=image, name="train", after=[("ok", upstream)])
    read_names([waiting], "wait_reason")

    with django_assert_num_queries(0):
        said = upstreams_named(waiting.wait_reason, waiting)
    with django_assert_num_queries(1):
        other_said = upstreams_named_text(f"preempted by job {other.pk}", waiting)
    with django_assert_num_queries(0):  # kept: a job page's events naming it again read it no more
        assert upstreams_named_text(f"preempted again by job {other.pk}", waiting) == "preempted again by job “load”"

    assert said == f'waits for job <a href="/jobs/{upstream.pk}/">extract</a> to succeed'
    assert other_said == "preempted by job “load”"

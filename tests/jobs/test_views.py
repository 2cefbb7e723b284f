"""The HTML pages: the same rules as the API, seen through a browser session."""

import hashlib
import html
import re
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client
from django.utils import timezone

from jobs.lifecycle import actions
from jobs.lifecycle.history import REAPER
from jobs.models import DataFile, Job, Outcome, OutputFile, Stage
from jobs.storage import logs
from jobs.storage.store import output_key
from jobs.web import views
from jobs.web.figures import figures
from teams.people import add_member
from tests.factories import ODD_OUTPUT_NAMES, download_name, store_output, submit_job, upload
from tests.jobs.conftest import T0, held, running
from tests.jobs.test_api import multipart

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def stranger(client, outsider):
    client.force_login(outsider)
    return client


@pytest.fixture
def job(member, team, image):
    return submit_job(member, team, image=image, name="nightly retrain")


def page(job, suffix: str = "") -> str:
    return f"/jobs/{job.pk}/{suffix}"


def declared(**changes) -> dict:
    form = {
        "name": "nightly retrain",
        "image": "busybox",
        "command": "python3 /data/train.py",
        "env": '{"EPOCHS": "5"}',
        "cpus": "1",
        "memory_mb": "64",
        "gpus": "0",
        "time_limit_s": "60",
        "outputs": "model.json\nreports/",
    }
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


# --- login ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "live/", "log.txt", "outputs/model.json"])
def test_a_job_page_needs_a_login(client, job, suffix):
    response = client.get(page(job, suffix))

    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("path", ["/", "/jobs/", "/jobs/new/"])
def test_the_list_and_the_form_need_a_login(client, db, path):
    response = client.get(path)

    assert response.status_code == 302 and response["Location"] == f"/login/?next={path}"


def test_cancel_needs_a_login(client, job):
    response = client.post(page(job, "cancel/"))

    assert response.status_code == 302 and response["Location"].startswith("/login/")
    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT


# --- the job list ------------------------------------------------------------------------------------


def test_the_list_shows_my_teams_jobs_only(me, member, teammate, outsider, team, other_team, image):
    submit_job(member, team, image=image, name="my retrain")
    submit_job(teammate, team, image=image, name="bobs conversion")
    submit_job(outsider, other_team, image=image, name="eves simulation")

    response = me.get("/jobs/")

    assert response.status_code == 200
    assert b"my retrain" in response.content and b"bobs conversion" in response.content
    assert b"eves simulation" not in response.content


def test_the_list_filters_by_stage(me, member, team, image):
    submit_job(member, team, image=image, name="still waiting")
    actions.cancel(submit_job(member, team, image=image, name="called off"), now=timezone.now())

    response = me.get("/jobs/?stage=submit")

    assert b"still waiting" in response.content and b"called off" not in response.content


@pytest.mark.parametrize(
    "group, shown",
    [("waiting", {"still waiting"}), ("running", {"being held"}), ("released", {"called off"}), ("", None)],
)
def test_the_list_filters_by_stage_group(me, member, team, image, job_at, group, shown):
    Job.objects.filter(pk=job_at(Stage.RENT).pk).update(name="being held")  # first: a pass holds the oldest
    submit_job(member, team, image=image, name="still waiting")
    actions.cancel(submit_job(member, team, image=image, name="called off"), now=timezone.now())

    response = me.get(f"/jobs/?stage={group}")

    assert response.status_code == 200
    names = {"still waiting", "called off", "being held"}
    assert {n for n in names if n.encode() in response.content} == (shown or names)


def test_the_list_filters_by_search_and_team(me, member, team, other_team, image):
    add_member(member.username, team=other_team)
    submit_job(member, team, image=image, name="red retrain", command=["python3", "/data/train.py"])
    submit_job(member, other_team, image=image, name="blue convert", command=["convert"])

    assert names_listed(me.get("/jobs/?q=train.py")) == ["red retrain"]
    assert names_listed(me.get("/jobs/?team=blue")) == ["blue convert"]
    assert names_listed(me.get("/jobs/?team=blue&q=retrain")) == []


@pytest.mark.parametrize(
    "query, field",
    [("stage=busy", "stage"), ("outcome=ok", "outcome"), ("team=red+team", "team"), ("since=yesterday", "since")],
)
def test_a_bad_filter_value_is_400_and_names_it(me, job, query, field):
    response = me.get(f"/jobs/?{query}")

    assert response.status_code == 400
    assert b'id="filter-errors"' in response.content and f"({field})".encode() in response.content
    assert b"nightly retrain" not in response.content


def test_a_bad_filter_value_from_htmx_is_400_with_the_rows_alone(me, job):
    response = me.get("/jobs/?stage=busy", **HTMX)

    assert response.status_code == 400
    assert b"<html" not in response.content and b"A filter has a bad value." in response.content


def names_listed(response) -> list[str]:
    assert response.status_code == 200
    return re.findall(
        r'<td data-label="Job"><a href="/jobs/[^"]+/" id="row-[^"]+">([^<]*)</a></td>', response.content.decode()
    )


def page_links(response) -> list[str]:
    nav = re.search(r'<nav class="filters" aria-label="Pages".*?</nav>', response.content.decode(), re.S)
    return [html.unescape(href) for href in re.findall(r'href="([^"]*)"', nav[0])] if nav else []


def test_the_list_is_paged_and_the_page_links_keep_the_filters(me, member, team, image, monkeypatch):
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    for n in range(5):
        submit_job(member, team, image=image, name=f"waiting {n}")
    actions.cancel(submit_job(member, team, image=image, name="called off"), now=timezone.now())

    first = me.get("/jobs/?stage=waiting&q=waiting")
    second = me.get("/jobs/?stage=waiting&q=waiting&page=2")
    last = me.get("/jobs/?stage=waiting&q=waiting&page=last")

    assert names_listed(first) == ["waiting 4", "waiting 3"]
    assert names_listed(second) == ["waiting 2", "waiting 1"]
    assert names_listed(last) == names_listed(me.get("/jobs/?stage=waiting&q=waiting&page=3")) == ["waiting 0"]
    assert "5–5 of 5" in last.content.decode()
    links = page_links(second)
    assert links and all("stage=waiting" in link and "q=waiting" in link for link in links)
    assert {"?stage=waiting&q=waiting&page=1", "?stage=waiting&q=waiting&page=3"} <= set(links)


def test_there_is_no_pager_when_one_page_holds_the_list(me, job):
    response = me.get("/jobs/")

    assert names_listed(response) == ["nightly retrain"] and page_links(response) == []


def test_more_jobs_than_a_page_are_all_reachable(me, member, team, image, monkeypatch):
    monkeypatch.setattr(views, "PAGE_SIZE", 3)
    for n in range(7):
        submit_job(member, team, image=image, name=f"job {n}")

    seen = [name for number in (1, 2, 3) for name in names_listed(me.get(f"/jobs/?page={number}"))]

    assert sorted(seen) == [f"job {n}" for n in range(7)]


@pytest.mark.parametrize("number", ["2", "0", "x"])
def test_a_page_that_does_not_exist_is_404(me, job, number):
    assert me.get(f"/jobs/?page={number}").status_code == 404


def test_htmx_gets_the_rows_alone(me, job):
    response = me.get("/jobs/", **HTMX)

    assert response.status_code == 200
    assert b"nightly retrain" in response.content and b"<html" not in response.content


def test_a_retried_jobs_wait_is_to_its_first_hold_as_its_page_says(
    me, member, team, image, local_node, django_assert_max_num_queries
):
    with time_machine.travel(T0 - timedelta(seconds=30), tick=False):
        retried = submit_job(member, team, image=image, name="retried", max_retries=1)
    running(held(retried))
    actions.release_lost(
        retried, node_name=local_node.name, last_heartbeat=T0, now=T0 + timedelta(seconds=40), actor=REAPER
    )
    held(retried, now=T0 + timedelta(seconds=45))
    submit_job(member, team, image=image, name="waiting")

    with django_assert_max_num_queries(6):
        rows = me.get("/jobs/", **HTMX).content.decode()

    waited = dict(re.findall(r'id="row-[^"]+">([^<]+)</a>.*?data-label="Waited"[^>]*>([^<]+)</td>', rows, re.S))
    assert waited == {"retried": "30 s", "waiting": "—"}  # not attempt 1's run and the second wait: 75 s
    assert figures(Job.objects.get(pk=retried.pk)).queue_wait == timedelta(seconds=30)


@pytest.mark.parametrize("jobs", [1, 15])
def test_the_list_query_count_does_not_grow_with_the_number_of_jobs(
    me, member, team, image, jobs, monkeypatch, django_assert_max_num_queries
):
    monkeypatch.setattr(views, "PAGE_SIZE", 10)
    for n in range(jobs):
        submit_job(member, team, image=image, name=f"job {n}")

    with django_assert_max_num_queries(7):  # the page's first holds, the budget warning's teams
        response = me.get("/jobs/?stage=waiting&q=job&page=last")

    assert response.status_code == 200 and b"job 0" in response.content


def test_the_list_refuses_a_post(me):
    assert me.post("/").status_code == 405


# --- the submit form -----------------------------------------------------------------------------------


def test_the_submit_form_renders(me, image):
    response = me.get("/jobs/new/")

    assert response.status_code == 200
    for field in ("name", "image", "command", "env", "cpus", "memory_mb", "gpus", "time_limit_s", "data", "outputs"):
        assert f'name="{field}"'.encode() in response.content, field
    assert b'enctype="multipart/form-data"' in response.content


def test_a_valid_submission_creates_the_job_and_shows_its_page(me, member, team, image):
    response = me.post("/jobs/new/", declared(data=[upload("train.py", "print(1)"), upload("train.csv", "a,b\n")]))

    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == page(job)
    assert (job.team, job.submitted_by, job.command) == (team, member, ["python3", "/data/train.py"])
    assert job.env == {"EPOCHS": "5"} and job.output_patterns == ["model.json", "reports/"]
    assert sorted(DataFile.objects.filter(job=job).values_list("name", flat=True)) == ["train.csv", "train.py"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"cpus": "0"}, "greater than or equal to 1"),
        ({"name": ""}, "This field is required"),
        ({"env": "[1]"}, "must be a JSON object"),
        ({"command": '["unclosed'}, "Cannot parse the command"),
        ({"outputs": "../etc"}, "without &#x27;..&#x27;"),
    ],
)
def test_bad_input_shows_the_error_beside_the_form_with_400(me, image, changes, message):
    response = me.post("/jobs/new/", declared(**changes))

    assert response.status_code == 400
    assert message.encode() in response.content
    assert b'name="command"' in response.content, "the form is shown again"
    assert Job.objects.count() == 0


def test_a_request_larger_than_any_node_shows_why(me, image, local_node):
    response = me.post("/jobs/new/", declared(cpus=str(len(local_node.cpu_ids) + 1)))

    assert response.status_code == 400 and b"can never be held" in response.content
    assert Job.objects.count() == 0


def test_an_upload_over_the_limit_answers_413_and_shows_the_error(me, image, settings):
    settings.E31_UPLOAD_FILE_MAX_BYTES = 100

    response = me.post("/jobs/new/", declared(data=[upload("huge.bin", b"x" * 101)]))

    assert response.status_code == 413
    assert b"huge.bin is over the per-file limit" in response.content
    assert Job.objects.count() == 0
    store = Path(settings.STORAGES["default"]["OPTIONS"]["location"])
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))


@pytest.fixture
def browser_session(member):
    """A client that checks CSRF as a browser's session is checked: the token travels in the form's body."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', client.get("/jobs/new/").content).group(1)
    client.form_token = token.decode()
    return client


def test_a_declared_upload_over_the_limit_is_413_before_the_body_is_read(browser_session, image, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 10 * 1024 * 1024

    response = browser_session.generic(
        "POST", "/jobs/new/", b"", content_type="multipart/form-data; boundary=x", CONTENT_LENGTH=str(20 * 1024**3)
    )

    assert response.status_code == 413
    assert response.wsgi_request._read_started is False
    text = html.unescape(response.content.decode())
    assert "The upload is too large: the upload (20480 MB) is over the job's limit of 10 MB." in text
    assert 'name="command"' in text, "the form is shown again, to be sent with fewer data"


def test_too_many_data_files_show_the_form_with_the_reason(browser_session, image, settings):
    settings.E31_UPLOAD_MAX_FILES = settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    form = declared(csrfmiddlewaretoken=browser_session.form_token, data=[upload(f"{n}.txt", "x") for n in range(3)])

    response = browser_session.post("/jobs/new/", form)

    assert response.status_code == 400
    assert b"At most 2 data files." in response.content and b'id="form-errors"' in response.content
    assert Job.objects.count() == 0


def test_fields_over_the_size_limit_show_the_form_with_the_reason(browser_session, image, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    form = declared(csrfmiddlewaretoken=browser_session.form_token, env='{"BIG": "' + "x" * 5000 + '"}')

    response = browser_session.post("/jobs/new/", form)

    assert response.status_code == 400 and b"The fields other than the data files are over" in response.content


def test_a_data_file_named_dot_dot_is_refused_on_the_form(me, image):
    body, content_type = multipart(declared(), [("train.csv", b"a,b\n"), ("..", b"secret")])

    response = me.generic("POST", "/jobs/new/", body, content_type=content_type)

    assert response.status_code == 400
    assert "'..' is not a usable file name" in html.unescape(response.content.decode())
    assert Job.objects.count() == 0


def test_the_submit_form_refuses_other_methods(me):
    assert me.put("/jobs/new/").status_code == 405


# --- the job page and its live part ----------------------------------------------------------------------


def test_the_job_page_shows_the_job_to_my_team(client, job, teammate):
    client.force_login(teammate)

    response = client.get(page(job))

    assert response.status_code == 200 and b"nightly retrain" in response.content


@pytest.mark.parametrize("suffix", ["", "live/", "log.txt", "outputs/model.json"])
def test_an_outsider_gets_404_on_a_job_page(stranger, job, suffix):
    logs.append_line(job.pk, "private")
    default_storage.save(output_key(job.pk, "model.json"), ContentFile(b"{}"))
    OutputFile.objects.create(job=job, path="model.json", size=2, sha256=hashlib.sha256(b"{}").hexdigest())

    response = stranger.get(page(job, suffix))

    assert response.status_code == 404


def live_poll(response) -> str | None:
    """The address the live part asks again each second, or None when it does not poll."""
    live = re.search(r'<div id="live"([^>]*)>', response.content.decode())
    assert live, "no live part"
    found = re.search(r'hx-get="([^"]+)" hx-trigger="every 1s"', live.group(1))
    return html.unescape(found.group(1)) if found else None


def test_the_live_part_keeps_polling_before_release_and_answers_204_while_unchanged(me, job_at):
    job = job_at(Stage.RUN)

    response = me.get(page(job, "live/"), **HTMX)
    again = live_poll(response)
    unchanged = me.get(again, **HTMX)
    Job.objects.filter(pk=job.pk).update(stage=Stage.OUTPUT)
    changed = me.get(again, **HTMX)

    assert response.status_code == 200 and again and again.startswith(page(job, "live/?v="))
    assert unchanged.status_code == 204 and unchanged.content == b""
    assert changed.status_code == 200 and live_poll(changed) != again


def test_the_live_part_stops_polling_once_released(me, job_at):
    job = job_at(Stage.RELEASE)

    response = me.get(page(job, "live/"), **HTMX)

    assert response.status_code == 286  # htmx: stop polling
    assert live_poll(response) is None
    assert Outcome.SUCCEEDED.encode() in response.content


def test_the_live_part_leaves_the_log_alone_and_the_log_lines_bring_it(me, job):
    logs.append_line(job.pk, "epoch 3: loss 0.25")

    assert b"epoch 3: loss 0.25" not in me.get(page(job, "live/"), **HTMX).content  # never replaced by polling
    assert b"epoch 3: loss 0.25" in me.get(page(job, "log/lines/?offset=0"), **HTMX).content


def test_the_full_log_downloads_as_text(me, job_at):
    job = job_at(Stage.RUN)
    logs.append_line(job.pk, "epoch 1")

    response = me.get(page(job, "log.txt"))

    assert response.status_code == 200 and b"".join(response.streaming_content) == b"[e31] epoch 1\n"


def test_an_output_downloads_from_its_page(me, job):
    default_storage.save(output_key(job.pk, "reports/model.json"), ContentFile(b'{"loss": 0.1}'))
    OutputFile.objects.create(job=job, path="reports/model.json", size=13, sha256="f" * 64)

    response = me.get(page(job, "outputs/reports/model.json"))

    assert response.status_code == 200 and b"".join(response.streaming_content) == b'{"loss": 0.1}'


def output_links(response) -> list[str]:
    """The download links of a job page (or its live part), as a browser would follow them."""
    return [
        html.unescape(href)
        for href in re.findall(r'<a href="([^"]*/outputs/[^"]*)" download>', response.content.decode())
    ]


@pytest.mark.parametrize("name", ODD_OUTPUT_NAMES)
@pytest.mark.parametrize("suffix", ["", "live/"])
def test_every_kept_output_name_is_linked_from_the_job_page_and_downloads(me, job, name, suffix):
    content = f"content of {name}".encode()
    store_output(job, name, content)

    response = me.get(page(job, suffix), **(HTMX if suffix else {}))

    assert response.status_code == 200
    [link] = output_links(response)
    download = me.get(link)
    assert download.status_code == 200 and b"".join(download.streaming_content) == content
    assert download_name(download) == name.rsplit("/", 1)[-1]


@pytest.mark.parametrize("suffix", ["", "live/"])
def test_a_job_page_still_links_an_older_output_named_with_a_newline(me, job, suffix):
    store_output(job, "two\nlines.txt", b"kept before such names were refused")

    response = me.get(page(job, suffix), **(HTMX if suffix else {}))

    assert response.status_code == 200
    [link] = output_links(response)
    assert b"".join(me.get(link).streaming_content) == b"kept before such names were refused"


# --- cancel ------------------------------------------------------------------------------------------


def test_cancel_releases_a_waiting_job_and_returns_to_its_page(me, job):
    response = me.post(page(job, "cancel/"))

    assert response.status_code == 302 and response["Location"] == page(job)
    job.refresh_from_db()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.CANCELLED)


def test_cancel_from_htmx_answers_with_the_live_part(me, job):
    response = me.post(page(job, "cancel/"), **HTMX)

    assert response.status_code == 200 and b"cancelled" in response.content
    assert b"<html" not in response.content


def test_cancel_of_a_running_job_asks_its_worker(me, job_at):
    job = job_at(Stage.RUN)

    me.post(page(job, "cancel/"))

    job.refresh_from_db()
    assert job.stage == Stage.RUN and job.cancel_requested


def test_the_page_says_who_cancelled(me, job):
    me.post(page(job, "cancel/"))

    response = me.get(page(job))

    assert b'cancelled by <span id="cancelled-by">alice</span>' in response.content


def test_an_outsider_cannot_cancel_a_job(stranger, job):
    assert stranger.post(page(job, "cancel/")).status_code == 404
    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT and not job.cancel_requested


def test_cancel_refuses_a_get(me, job):
    assert me.get(page(job, "cancel/")).status_code == 405
    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT


def test_a_member_of_several_teams_must_choose_one(me, member, other_team, image):
    add_member(member.username, team=other_team)  # no new password: the session stays valid

    response = me.post("/jobs/new/", declared())

    assert response.status_code == 400 and b"Choose a team" in response.content
    assert me.post("/jobs/new/", declared(team="blue")).status_code == 302

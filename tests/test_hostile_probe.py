"""A hostile tester's probe, over HTTP only: a member of another team, a curious non-operator, an
anonymous caller and a sender of junk. Each check says what the site answers and must keep answering.

Red team (alice, bob) owns a released job with outputs and a log, a waiting job, a template and a
record; eve of the blue team tries to reach them; olga is an operator.
"""

import json
import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.test import Client
from django.utils import timezone

from accounting.meter import Usage
from jobs.models import Job, Outcome, Stage
from jobs.storage import logs
from jobtemplates.models import JobTemplate
from pool.models import Node
from teams.models import ApiToken
from teams.tokens import issue_token
from tests.conftest import api_client_for
from tests.factories import RuntimeImageFactory, ended_job, store_output, submit_job
from tests.jobs.test_api import multipart

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
MONTH = f"{timezone.now():%Y-%m}"
CSRF = re.compile(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]+"')  # masked anew on each page


# --- the scene ------------------------------------------------------------------------------------


@pytest.fixture
def image(db):
    return RuntimeImageFactory()


@pytest.fixture
def done(member, team, image, local_node):
    """Red's released job: a record, a log, and outputs of every kind a browser might run."""
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now() - timedelta(minutes=5),
                    usage=Usage(cpu_seconds=10.0, memory_peak_mb=10), name="red secret retrain",
                    log=b"red's log line\n")  # fmt: skip
    store_output(job, "notes.txt", b"red notes")
    store_output(job, "page.html", b"<script>alert(document.cookie)</script>")
    store_output(job, "drawing.svg", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>')
    store_output(job, "data.xml", b"<x/>")
    store_output(job, "app.js", b"alert(1)")
    store_output(job, "plot.png", PNG)
    store_output(job, "fake.png", b"<html><script>alert(1)</script></html>")
    store_output(job, "metrics.json", b'{"loss": 0.5}')
    return job


@pytest.fixture
def waiting(member, team, image, local_node, done):
    """Red's job still waiting for compute (submitted after `done` released, so the pool is free)."""
    job = submit_job(member, team, image=image, name="red waiting", cpus=1)
    assert job.stage == Stage.SUBMIT
    return job


@pytest.fixture
def red_template(team, image, member):
    return JobTemplate.objects.create(team=team, name="red template", image=image, command="echo {word}",
                                      defaults={"word": "hi"}, created_by=member)  # fmt: skip


@pytest.fixture
def eve(client, outsider):
    client.force_login(outsider)
    return client


@pytest.fixture
def alice(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def anonymous(db):
    return Client()


def job_paths(job: Job) -> list[str]:
    return [
        f"/jobs/{job.pk}/",
        f"/jobs/{job.pk}/live/",
        f"/jobs/{job.pk}/log.txt",
        f"/jobs/{job.pk}/log/lines/",
        f"/jobs/{job.pk}/outputs/notes.txt",
        f"/jobs/{job.pk}/outputs.zip",
        f"/jobs/{job.pk}/preview/notes.txt",
        f"/jobs/{job.pk}/image/plot.png",
        f"/jobs/{job.pk}/resubmit/",
    ]


def api_job_paths(job: Job) -> list[str]:
    return [
        f"/api/v1/jobs/{job.pk}/",
        f"/api/v1/jobs/{job.pk}/logs/",
        f"/api/v1/jobs/{job.pk}/outputs/",
        f"/api/v1/jobs/{job.pk}/outputs/notes.txt",
    ]


# --- another team's objects are 404, never 403 or 200 -----------------------------------------------


def test_every_page_of_another_teams_job_is_404_and_names_nothing_of_it(eve, done):
    for path in job_paths(done):
        response = eve.get(path)
        assert response.status_code == 404, path
        assert b"red secret" not in response.content and b"red notes" not in response.content, path


def test_another_teams_job_answers_exactly_as_a_job_that_does_not_exist(eve, done):
    missing = "00000000-0000-4000-8000-000000000000"
    red = eve.get(f"/jobs/{done.pk}/").content.decode().replace(str(done.pk), missing)
    nobody = eve.get(f"/jobs/{missing}/").content.decode()
    assert CSRF.sub("", red) == CSRF.sub("", nobody)


def test_every_api_url_of_another_teams_job_is_404(outsider_api, done):
    for path in api_job_paths(done):
        response = outsider_api.get(path)
        assert response.status_code == 404, path
        assert response.json() == {"detail": "No such job."}, path


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_the_teammate_reaches_what_eve_cannot(client, teammate, done):
    client.force_login(teammate)  # the 404s above are about the team, not the pages being broken
    seen = {}
    for path in job_paths(done):
        response = client.get(path)
        assert response.status_code in (200, 286), path  # 286: htmx, stop polling (released)
        seen[path.removeprefix(f"/jobs/{done.pk}/")] = body_of(response)
    assert b"red secret retrain" in seen[""] and b"red secret retrain" in seen["resubmit/"]
    assert b"succeeded" in seen["live/"]
    assert seen["log.txt"] == b"red's log line\n" and b"red&#x27;s log line" in seen["log/lines/"]
    assert seen["outputs/notes.txt"] == b"red notes" and b"red notes" in seen["preview/notes.txt"]
    assert seen["image/plot.png"] == PNG and b"notes.txt" in seen["outputs.zip"]


def test_eve_cannot_cancel_red_s_job_from_the_page(eve, waiting):
    assert eve.post(f"/jobs/{waiting.pk}/cancel/").status_code == 404
    waiting.refresh_from_db()
    assert not waiting.cancel_requested and waiting.stage == Stage.SUBMIT


def test_eve_cannot_cancel_red_s_job_through_the_api(outsider_api, waiting):
    assert outsider_api.post(f"/api/v1/jobs/{waiting.pk}/cancel/").status_code == 404
    waiting.refresh_from_db()
    assert not waiting.cancel_requested and waiting.stage == Stage.SUBMIT


def test_eve_cannot_resubmit_red_s_job_and_use_its_data(eve, done, image):
    before = Job.objects.count()
    form = {"name": "stolen", "image": image.name, "command": "cat /data/x", "cpus": 1, "memory_mb": 64,
            "time_limit_s": 30, "reuse": ["x"]}  # fmt: skip
    assert eve.post(f"/jobs/{done.pk}/resubmit/", form).status_code == 404
    assert Job.objects.count() == before


def test_eve_cannot_pin_red_s_outputs_from_the_page_or_the_api(eve, outsider_api, done):
    assert eve.post(f"/jobs/{done.pk}/pin/").status_code == 404
    assert outsider_api.post(f"/api/v1/jobs/{done.pk}/pin/").status_code == 404
    done.refresh_from_db()
    assert done.pinned_until is None


def test_eve_cannot_save_red_s_job_as_a_template(eve, done):
    assert eve.post(f"/jobs/{done.pk}/save-template/", {"name": "mine now"}).status_code == 404
    assert not JobTemplate.objects.exists()


def test_eve_cannot_see_or_run_red_s_template(eve, red_template):
    assert eve.get(f"/templates/{red_template.pk}/").status_code == 404
    assert eve.post(f"/templates/{red_template.pk}/", {"word": "x"}).status_code == 404
    assert b"red template" not in eve.get("/templates/").content
    assert not Job.objects.exists()


def test_red_s_statement_is_404_to_eve_on_the_page_and_the_api(eve, outsider_api, done):
    assert eve.get(f"/accounting/statements/red/{MONTH}/").status_code == 404
    assert outsider_api.get("/api/v1/accounting/statements/", {"team": "red", "month": MONTH}).status_code == 404
    assert (
        outsider_api.get("/api/v1/accounting/statements/", {"team": "red", "month": MONTH, "format": "csv"}).status_code
        == 404
    )


def test_a_statement_of_a_team_that_does_not_exist_is_the_same_404(outsider_api, done):
    asked = {"month": MONTH}
    red = outsider_api.get("/api/v1/accounting/statements/", {**asked, "team": "red"})
    nobody = outsider_api.get("/api/v1/accounting/statements/", {**asked, "team": "no-such-team"})
    assert red.status_code == nobody.status_code == 404 and red.json() == nobody.json()


def test_the_statements_page_lists_only_eve_s_own_team(eve, done):
    page = eve.get("/accounting/statements/").content.decode()
    assert "/accounting/statements/blue/" in page and "/accounting/statements/red/" not in page


def test_red_s_record_is_404_to_eve_and_absent_from_her_lists(outsider_api, done):
    record = done.records.get()
    assert outsider_api.get(f"/api/v1/accounting/records/{record.pk}/").status_code == 404
    assert outsider_api.get("/api/v1/accounting/records/").json()["count"] == 0
    assert outsider_api.get("/api/v1/accounting/records/", {"team": "red"}).json()["count"] == 0
    assert outsider_api.get("/api/v1/accounting/records/", {"job": str(done.pk)}).json()["count"] == 0
    assert "red secret" not in outsider_api.get("/api/v1/accounting/records/", {"format": "csv"}).content.decode()


def test_red_s_usage_is_not_in_eve_s_usage(outsider_api, eve, done):
    assert outsider_api.get("/api/v1/accounting/usage/", {"group_by": "team"}).json()["rows"] == []
    assert "red secret" not in eve.get("/usage/").content.decode()
    assert "red secret" not in b"".join(eve.get("/usage.csv").streaming_content).decode()


def test_filtering_the_lists_by_red_shows_eve_nothing(eve, outsider_api, done):
    assert outsider_api.get("/api/v1/jobs/", {"team": "red"}).json()["count"] == 0
    assert outsider_api.get("/api/v1/jobs/", {"user": "alice"}).json()["count"] == 0
    assert "red secret" not in eve.get("/jobs/", {"team": "red"}).content.decode()
    assert "red secret" not in eve.get("/jobs/", {"q": "secret"}).content.decode()
    assert "red secret" not in eve.get("/").content.decode()


def test_a_job_submitted_by_eve_for_red_is_refused(outsider_api, image, done):
    body = {"team": "red", "name": "x", "image": image.name, "command": "true", "cpus": 1, "memory_mb": 64,
            "time_limit_s": 30}  # fmt: skip
    response = outsider_api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400 and "team" in response.json()
    assert not Job.objects.filter(submitted_by__username="eve").exists()


def test_an_idempotency_key_of_another_person_does_not_return_their_job(api, outsider_api, image, local_node):
    body = {"name": "x", "image": image.name, "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 30}
    red = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="nightly")
    blue = outsider_api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="nightly")
    assert red.status_code == blue.status_code == 201 and red.json()["id"] != blue.json()["id"]


# --- tokens -----------------------------------------------------------------------------------------


def test_another_persons_token_is_404_to_read_and_to_revoke(member, outsider, outsider_api):
    token, _ = issue_token(member, name="alice's cron")
    assert outsider_api.get(f"/api/v1/tokens/{token.pk}/").status_code == 404
    assert outsider_api.delete(f"/api/v1/tokens/{token.pk}/").status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()
    assert "alice's cron" not in outsider_api.get("/api/v1/tokens/", {"user": "alice"}).content.decode()


def test_another_persons_token_is_404_to_revoke_from_the_account_page(eve, member):
    token, _ = issue_token(member, name="alice's cron")
    assert eve.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_a_teammate_cannot_revoke_alice_s_token_either(teammate, member):
    token, _ = issue_token(member, name="alice's cron")
    assert api_client_for(teammate).delete(f"/api/v1/tokens/{token.pk}/").status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_a_revoked_token_is_401_at_once(member, image):
    token, key = issue_token(member, name="leaked")
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/jobs/").status_code == 200
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204

    response = client.get("/api/v1/jobs/")

    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Token")


@pytest.mark.parametrize(
    "header",
    ["Token not-a-key", "Token ", "Token a b", "Bearer whatever", "Token " + "x" * 5000, "Token k\u00e9y"],
)
def test_a_bad_or_malformed_token_is_401_never_500(db, header):
    response = Client(HTTP_AUTHORIZATION=header).get("/api/v1/jobs/")
    assert response.status_code == 401


def test_the_api_without_credentials_is_401_with_www_authenticate(anonymous):
    for path in ["/api/v1/jobs/", "/api/v1/tokens/", "/api/v1/accounting/records/", "/api/v1/pool/nodes/"]:
        response = anonymous.get(path)
        assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Token"), path


@pytest.mark.parametrize("path", ["/", "/jobs/", "/jobs/new/", "/usage/", "/usage.csv", "/account/", "/templates/",
                                  "/accounting/statements/", "/isolation/", "/operator/"])  # fmt: skip
def test_every_page_sends_an_anonymous_caller_to_log_in(anonymous, path):
    response = anonymous.get(path)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


# --- operators only ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/operator/", "/operator/nodes/", "/operator/nodes/{node}/drain/", "/operator/nodes/{node}/resume/",
     "/accounting/utilisation/", "/api/v1/accounting/utilisation/"],
)  # fmt: skip
def test_operator_pages_are_404_to_a_member(alice, local_node, path):
    assert alice.get(path.format(node=local_node.name)).status_code == 404


def test_a_member_cannot_drain_a_node_from_the_operator_page(alice, local_node):
    assert alice.post(f"/operator/nodes/{local_node.name}/drain/").status_code == 404
    local_node.refresh_from_db()
    assert local_node.state == Node.State.ACTIVE


def test_a_member_cannot_drain_or_resume_a_node_through_the_api(api, local_node):
    assert api.post(f"/api/v1/pool/nodes/{local_node.name}/drain/").status_code == 403  # as docs/api.md says
    assert api.post(f"/api/v1/pool/nodes/{local_node.name}/resume/").status_code == 403
    local_node.refresh_from_db()
    assert local_node.state == Node.State.ACTIVE and local_node.state_changed_by is None


def test_a_member_gets_no_pool_summary_of_every_team(api, alice, done):
    response = api.get("/api/v1/accounting/statements/", {"month": MONTH})
    assert response.status_code == 400 and "team" in response.json()
    assert "Pool" not in alice.get("/accounting/statements/").content.decode()


def test_an_operator_reaches_what_members_cannot(client, operator, local_node, done):
    client.force_login(operator)
    seen = {}
    for path in ["/operator/", "/operator/nodes/", "/accounting/utilisation/", "/api/v1/accounting/utilisation/",
                 f"/accounting/statements/red/{MONTH}/"]:  # fmt: skip
        response = client.get(path)
        assert response.status_code == 200, path
        seen[path] = response.content.decode()
    assert local_node.name in seen["/operator/"] and local_node.name in seen["/operator/nodes/"]
    assert 'id="overall"' in seen["/accounting/utilisation/"]
    assert f"<td>{local_node.name}</td>" in seen["/accounting/utilisation/"]
    assert local_node.name in {n["node"] for n in json.loads(seen["/api/v1/accounting/utilisation/"])["nodes"]}
    assert f"Statement: team red, {timezone.now():%B %Y}" in seen[f"/accounting/statements/red/{MONTH}/"]


def test_the_admin_is_not_open_to_a_member(alice):
    response = alice.get("/admin/jobs/job/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_metrics_refuse_without_the_token(client, settings, db):
    settings.E31_METRICS_TOKEN = "s3cret-metrics"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="s3cret-metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics").status_code == 200


def test_metrics_refuse_a_signed_in_member_without_the_token(alice, settings):
    settings.E31_METRICS_TOKEN = "s3cret-metrics"
    assert alice.get("/metrics").status_code == 401


def test_metrics_without_a_token_configured_answer_loopback_only(db, settings):
    settings.E31_METRICS_TOKEN = None
    assert Client(REMOTE_ADDR="203.0.113.7").get("/metrics").status_code == 401
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200


# --- bad input is a 4xx, never a 500 ----------------------------------------------------------------


JUNK_FILTERS = [
    {"since": "garbage"},
    {"until": "2026-02-30"},
    {"since": "\x00"},
    {"since": "2026-01-01T00:00:00+99:00"},
    {"outcome": "nope"},
    {"stage": "'; DROP TABLE jobs_job; --"},
    {"team": "not a slug!"},
    {"image": "../../etc"},
    {"user": "a\x00b"},
    {"q": "x\x00y"},
    {"q": "z" * 5000},
]


@pytest.mark.parametrize("query", JUNK_FILTERS, ids=lambda q: repr(q)[:40])
def test_junk_in_a_filter_of_the_job_list_is_400(alice, query):
    assert alice.get("/jobs/", query).status_code == 400


@pytest.mark.parametrize("query", JUNK_FILTERS, ids=lambda q: repr(q)[:40])
def test_junk_in_a_filter_of_the_api_job_list_is_400_naming_it(api, query):
    response = api.get("/api/v1/jobs/", query)
    assert response.status_code == 400 and set(response.json()) == set(query)


@pytest.mark.parametrize("query", JUNK_FILTERS, ids=lambda q: repr(q)[:40])
def test_junk_in_a_filter_of_the_usage_page_and_csv_is_400(alice, query):
    assert alice.get("/usage/", query).status_code == 400
    response = alice.get("/usage.csv", query)
    assert response.status_code == 400 and response.content.startswith(b"Bad filter: ")


@pytest.mark.parametrize("query", [{"sort": "evil"}, {"sort": "submitted_by__password"}, {"sort": "-id,name"}])
def test_a_sort_by_anything_but_a_column_is_400(alice, query):
    assert alice.get("/jobs/", query).status_code == 400


@pytest.mark.parametrize("since", ["garbage", "2026-13-01", "\x00", "\u2603", "9" * 40])
def test_junk_since_on_the_review_is_400(alice, since):
    assert alice.get("/", {"since": since}).status_code == 400


@pytest.mark.parametrize("page", ["-1", "0", "999999", "99999999999999999999999", "abc", "1e400", "nan", "\x00"])
def test_a_page_that_does_not_exist_is_404_on_every_list(alice, api, done, page):
    for path in ["/", "/jobs/", "/usage/"]:
        assert alice.get(path, {"page": page}).status_code == 404, path
    for path in ["/api/v1/jobs/", "/api/v1/accounting/records/", "/api/v1/tokens/"]:
        assert api.get(path, {"page": page}).status_code == 404, path


def test_the_last_page_is_a_page(alice, done):
    response = alice.get("/jobs/", {"page": "last"})
    assert response.status_code == 200 and "red secret retrain" in response.content.decode()


@pytest.mark.parametrize(
    "query",
    [{"team": "a b"}, {"node": "../x"}, {"outcome": "nope"}, {"job": "not-a-uuid"}, {"since": "yesterday"},
     {"user": "\x00"}],
)  # fmt: skip
def test_junk_in_a_filter_of_the_records_is_400(api, query):
    response = api.get("/api/v1/accounting/records/", query)
    assert response.status_code == 400 and set(response.json()) == set(query)


@pytest.mark.parametrize(
    "query", [{"group_by": "password"}, {"since": "garbage"}, {"until": "\x00"}, {"since": "2026-02-30"}]
)
def test_junk_in_the_usage_api_is_400(api, query):
    response = api.get("/api/v1/accounting/usage/", query)
    assert response.status_code == 400 and set(response.json()) == set(query)


@pytest.mark.parametrize("month", ["", "2026-13", "2026-1", "26-01", "2026-01-01", "\x00", "0000-01", "9999-12"])
def test_a_statement_of_a_month_that_is_no_month_is_400_in_the_api(api, team, month):
    response = api.get("/api/v1/accounting/statements/", {"team": "red", "month": month})
    assert response.status_code == 400 and set(response.json()) == {"month"}


@pytest.mark.parametrize("month", ["2026-13", "junk", "0000-01", "9999-12"])
def test_a_statement_page_of_a_month_that_is_no_month_is_404(alice, team, month):
    assert alice.get(f"/accounting/statements/red/{month}/").status_code == 404


def test_the_statements_index_takes_a_month_off_the_calendar_as_this_month(alice, team):
    response = alice.get("/accounting/statements/", {"month": "0000-01"})
    assert response.status_code == 200
    page = response.content.decode()
    assert f"<th>{timezone.now():%B %Y}</th>" in page
    assert f'href="/accounting/statements/red/{MONTH}/"' in page


@pytest.mark.parametrize("offset", ["-1", "abc", str(2**63), "1e3", "\x00"])
def test_a_bad_log_offset_is_400_in_the_api_and_the_page(api, alice, done, offset):
    assert api.get(f"/api/v1/jobs/{done.pk}/logs/", {"offset": offset}).status_code == 400
    assert alice.get(f"/jobs/{done.pk}/log/lines/", {"offset": offset}).status_code == 400


@pytest.mark.parametrize("job_id", ["not-a-uuid", "00000000-0000-0000-0000-00000000000g", "../../etc/passwd"])
def test_a_malformed_job_id_is_404(alice, api, job_id):
    assert alice.get(f"/jobs/{job_id}/").status_code == 404
    assert api.get(f"/api/v1/jobs/{job_id}/").status_code == 404


@pytest.mark.parametrize(
    "path", ["../../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "/etc/passwd", "notes.txt/..", "missing.txt"]
)
def test_an_output_path_that_is_no_output_of_the_job_is_404(alice, api, done, path):
    assert alice.get(f"/jobs/{done.pk}/outputs/{path}").status_code == 404
    assert api.get(f"/api/v1/jobs/{done.pk}/outputs/{path}").status_code == 404
    assert alice.get(f"/jobs/{done.pk}/preview/{path}").status_code == 404


def test_saving_a_template_with_a_nul_byte_in_its_name_is_refused_not_500(alice, done):
    response = alice.post(f"/jobs/{done.pk}/save-template/", {"name": "a\x00b"}, follow=True)
    assert response.redirect_chain == [(f"/jobs/{done.pk}/", 302)]
    page = response.content.decode()
    assert "Not saved: the name " in page and "Null characters are not allowed." in page and "U+0000" in page
    assert not JobTemplate.objects.exists()


# --- submitting junk through the API ------------------------------------------------------------------


def body(img, **changes):
    base = {"name": "probe", "image": img.name, "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 30}
    return {**base, **changes}


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"cpus": "many"}, "cpus"),
        ({"cpus": -1}, "cpus"),
        ({"cpus": 0}, "cpus"),
        ({"cpus": 10**30}, "cpus"),
        ({"cpus": 1.5}, "cpus"),
        ({"cpus": True}, "cpus"),
        ({"memory_mb": -64}, "memory_mb"),
        ({"memory_mb": 2**63}, "memory_mb"),
        ({"gpus": -1}, "gpus"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"time_limit_s": 10**12}, "time_limit_s"),
        ({"time_limit_s": "forever"}, "time_limit_s"),
        ({"time_limit_s": "9" * 400 + "d"}, "time_limit_s"),
        ({"max_retries": 10**6}, "max_retries"),
        ({"image": "../../busybox"}, "image"),
        ({"image": ["busybox"]}, "image"),
        ({"name": {"$ne": ""}}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"command": []}, "command"),
        ({"command": [1, 2]}, "command"),
        ({"command": ["sh", "a\x00b"]}, "command"),
        ({"command": "unterminated 'quote"}, "command"),
        ({"command": {"argv": "x"}}, "command"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"A-B": "x"}}, "env"),
        ({"env": {"LD PRELOAD": "x"}}, "env"),
        ({"env": {"A": 1}}, "env"),
        ({"env": {"A": "x\x00y"}}, "env"),
        ({"env": ["A=1"]}, "env"),
        ({"env": "not json"}, "env"),
        ({"outputs": ["../../etc/passwd"]}, "outputs"),
        ({"outputs": ["/etc/passwd"]}, "outputs"),
        ({"outputs": ["a/../../b"]}, "outputs"),
        ({"outputs": ["a\x00b"]}, "outputs"),
        ({"outputs": [{"glob": "*"}]}, "outputs"),
        ({"outputs": ["x" * 513]}, "outputs"),
        ({"outputs": [f"f{i}" for i in range(101)]}, "outputs"),
        ({"isolation": "none"}, "isolation"),
        ({"team": "blue"}, "team"),
    ],
    ids=lambda v: repr(v)[:50] if isinstance(v, dict) else v,
)
def test_a_submission_with_a_bad_field_is_400_naming_it(api, image, local_node, changes, field):
    response = api.post("/api/v1/jobs/", body(image, **changes), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize("raw", [b"[]", b'"a string"', b"42", b"null", b"{not json", b"\xff\xfe"])
def test_a_submission_body_that_is_not_an_object_is_400(api, local_node, raw):
    response = api.post("/api/v1/jobs/", raw, content_type="application/json")
    assert response.status_code == 400
    assert not Job.objects.exists()


def test_a_request_no_node_could_hold_is_400(api, image, local_node):
    response = api.post("/api/v1/jobs/", body(image, cpus=256), format="json")
    assert response.status_code == 400 and "never be held" in json.dumps(response.json())


def test_an_upload_over_the_per_file_limit_is_413_and_stores_nothing(api, image, local_node, settings):
    settings.E31_UPLOAD_FILE_MAX_BYTES = 1024
    from django.core.files.uploadedfile import SimpleUploadedFile

    big = SimpleUploadedFile("big.bin", b"x" * 4096)
    response = api.post("/api/v1/jobs/", {**body(image), "data": big}, format="multipart")
    assert response.status_code == 413 and "per-file limit" in response.json()["detail"]
    assert not Job.objects.exists()


def test_a_declared_length_over_any_submission_is_413_unread(api, local_node, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 1024
    response = api.post("/api/v1/jobs/", b"x" * 10, content_type="application/json", CONTENT_LENGTH=str(10**12))
    assert response.status_code == 413


def test_a_data_file_named_as_a_path_is_staged_by_its_last_part_only(api, image, local_node):
    raw, kind = multipart(body(image), [("../../../etc/cron.d/evil", b"x")])
    response = api.generic("POST", "/api/v1/jobs/", raw, content_type=kind)
    assert response.status_code == 201, response.content
    assert [f["name"] for f in response.json()["data"]] == ["evil"]


def test_an_idempotency_key_reused_with_another_request_is_422(api, image, local_node):
    first = api.post("/api/v1/jobs/", body(image), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    again = api.post("/api/v1/jobs/", body(image, cpus=2), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    same = api.post("/api/v1/jobs/", body(image), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert (first.status_code, again.status_code, same.status_code) == (201, 422, 200)
    assert Job.objects.count() == 1


def test_an_idempotency_key_over_255_characters_is_400(api, image, local_node):
    response = api.post("/api/v1/jobs/", body(image), format="json", HTTP_IDEMPOTENCY_KEY="k" * 256)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()


@pytest.mark.parametrize(
    "changes", [{"cpus": -1}, {"cpus": 10**30}, {"memory_mb": "lots"}, {"time_limit_s": 0}, {"image": "nope"}]
)
def test_a_bad_estimate_request_is_400(api, image, changes):
    response = api.post("/api/v1/jobs/estimate/", {**body(image), **changes}, format="json")
    assert response.status_code == 400


def test_the_forms_estimate_with_junk_shows_nothing_rather_than_failing(alice, image):
    junk = alice.get("/jobs/estimate/", {"cpus": "1e400", "memory_mb": "\x00", "time_limit_s": "-1"})
    sound = alice.get("/jobs/estimate/", {"cpus": "1", "memory_mb": "64", "time_limit_s": "60", "image": image.name})

    assert junk.status_code == 200 and "Worst case" not in junk.content.decode()
    assert "appears once cpus, memory and the time limit are set" in junk.content.decode()
    assert "Worst case: <strong>" in sound.content.decode()  # the same partial, with an estimate to show


@pytest.mark.parametrize("name", ["", "x" * 101, "a\x00b"])
def test_a_token_with_a_bad_name_is_400(api, name):
    assert api.post("/api/v1/tokens/", {"name": name}, format="json").status_code == 400


# --- outputs can never run script in the site's origin -----------------------------------------------


@pytest.mark.parametrize("path", ["page.html", "drawing.svg", "data.xml", "app.js", "notes.txt", "fake.png"])
def test_an_output_download_is_an_attachment_sandboxed_and_not_sniffed(alice, api, done, path):
    for response in (alice.get(f"/jobs/{done.pk}/outputs/{path}"), api.get(f"/api/v1/jobs/{done.pk}/outputs/{path}")):
        assert response.status_code == 200
        assert response["Content-Disposition"].startswith("attachment")
        assert response["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in response["Content-Security-Policy"]
        kind = response["Content-Type"]
        assert not any(bad in kind for bad in ("html", "svg", "xml", "javascript")), (path, kind)


def test_the_inline_image_is_only_a_real_png_and_sandboxed(alice, done):
    response = alice.get(f"/jobs/{done.pk}/image/plot.png")
    assert response["Content-Type"] == "image/png" and response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"].startswith("sandbox")
    assert alice.get(f"/jobs/{done.pk}/image/fake.png").status_code == 404
    assert alice.get(f"/jobs/{done.pk}/image/page.html").status_code == 404


def test_a_preview_of_markup_shows_it_escaped(alice, done):
    store_output(done, "evil.txt", b"<script>alert(1)</script><img src=x onerror=alert(2)>")
    page = alice.get(f"/jobs/{done.pk}/preview/evil.txt").content.decode()
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)" in page


def test_the_log_download_is_plain_text_not_sniffed(alice, done):
    logs.append(done.pk, logs.end(done.pk), b"<script>alert(1)</script>\n")
    response = alice.get(f"/jobs/{done.pk}/log.txt")
    assert response["Content-Type"].startswith("text/plain")
    assert response["X-Content-Type-Options"] == "nosniff"


def test_the_zip_download_is_an_attachment_not_sniffed(alice, done):
    response = alice.get(f"/jobs/{done.pk}/outputs.zip")
    assert response["Content-Type"] == "application/zip" and response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == f'attachment; filename="outputs-{done.pk}.zip"'


def test_an_output_name_cannot_split_the_download_header(alice, done):
    store_output(done, 'x";\r\nSet-Cookie: a=b.txt', b"x")
    response = alice.get(f"/jobs/{done.pk}/outputs/{quote(chr(120) + chr(34) + ';' + chr(13) + chr(10))}"
                         f"{quote('Set-Cookie: a=b.txt')}")  # fmt: skip
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers and not response.cookies


def test_an_inline_log_line_with_markup_is_escaped_on_the_job_page(alice, member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), log=b"<script>alert('log')</script>\n")
    page = alice.get(f"/jobs/{job.pk}/").content.decode()
    assert "<script>alert('log')" not in page and "&lt;script&gt;alert(&#x27;log&#x27;)" in page


# --- moments at the edges of the calendar ----------------------------------------------------------

# Well-formed ISO 8601 past the calendar the site reads (0002-01-01..9998-12-31 in UTC; the first two
# overflow once moved to UTC): each is taken as the edge it passes, never a 500.
PAST_THE_END = ["9999-12-31T23:59:59-23:59", "9999-12-31"]
BEFORE_THE_START = ["0001-01-01T00:00:00+23:59", "0001-01-01"]
OFF_CALENDAR = PAST_THE_END + BEFORE_THE_START
# Offsets ISO 8601 allows and PostgreSQL does not (it takes ±15:59): moved to UTC first, so they are fine.
FAR_OFFSETS = ["2026-01-01T00:00:00+16:00", "2026-01-01T00:00:00-23:59"]


# What each list shows of red's released job `done` (the API's tokens: alice's token, made with `api`).
ALL_OF_RED = {"/jobs/": 1, "/usage/": 1, "/usage.csv": 1, "/api/v1/jobs/": 1, "/api/v1/accounting/records/": 1,
              "/api/v1/tokens/": 1, "/api/v1/accounting/usage/": 1}  # fmt: skip
NONE_OF_RED = dict.fromkeys(ALL_OF_RED, 0)


def shown_on_every_list(alice: Client, api, query: dict[str, str]) -> dict[str, int]:
    """How many of red's rows each job list, usage report and API list answers to `query` (each a 200)."""
    shown = {}
    for path in ["/jobs/", "/usage/"]:
        response = alice.get(path, query)
        assert response.status_code == 200, (path, query)
        shown[path] = int("red secret retrain" in response.content.decode())
    response = alice.get("/usage.csv", query)
    assert response.status_code == 200, query
    shown["/usage.csv"] = b"".join(response.streaming_content).decode().count("red secret retrain")
    for path in ["/api/v1/jobs/", "/api/v1/accounting/records/", "/api/v1/tokens/"]:
        response = api.get(path, query)
        assert response.status_code == 200, (path, query)
        shown[path] = response.json()["count"]
    response = api.get("/api/v1/accounting/usage/", query)
    assert response.status_code == 200, query
    shown["/api/v1/accounting/usage/"] = sum(row["records"] for row in response.json()["rows"])
    return shown


def reviewed(alice: Client, query: dict[str, str]) -> list[str]:
    """The names of the ended jobs the review lists for `query`."""
    response = alice.get("/", query)
    assert response.status_code == 200, query
    return re.findall(r'<a class="job-link" href="/jobs/[^"]+/"><strong>([^<]*)</strong>', response.content.decode())


@pytest.mark.parametrize("name", ["since", "until"])
def test_a_moment_off_the_calendar_is_taken_as_its_edge_on_every_job_list(alice, api, done, name):
    for moment in OFF_CALENDAR:
        # Until past the end and since before the start bound nothing; the other two leave nothing in.
        everything = (name == "until") == (moment in PAST_THE_END)
        assert shown_on_every_list(alice, api, {name: moment}) == (ALL_OF_RED if everything else NONE_OF_RED), moment


def test_until_past_the_end_means_no_end_and_since_before_the_start_means_from_the_start(api, done):
    for moment in PAST_THE_END:
        assert api.get("/api/v1/jobs/", {"until": moment}).json()["count"] == 1, moment
        assert api.get("/api/v1/jobs/", {"since": moment}).json()["count"] == 0, moment
    for moment in BEFORE_THE_START:
        assert api.get("/api/v1/jobs/", {"since": moment}).json()["count"] == 1, moment
        assert api.get("/api/v1/jobs/", {"until": moment}).json()["count"] == 0, moment


@pytest.mark.parametrize("name", ["since", "until"])
def test_a_moment_off_the_calendar_is_taken_as_its_edge_on_the_review(alice, done, name):
    for moment in OFF_CALENDAR:
        everything = (name == "until") == (moment in PAST_THE_END)
        assert reviewed(alice, {name: moment}) == (["red secret retrain"] if everything else []), moment


def test_a_moment_off_the_calendar_is_taken_as_its_edge_on_utilisation(client, operator):
    client.force_login(operator)
    for name, moment in [("until", m) for m in OFF_CALENDAR] + [("since", m) for m in PAST_THE_END]:
        assert client.get("/accounting/utilisation/", {name: moment}).status_code == 200, moment
        assert client.get("/api/v1/accounting/utilisation/", {name: moment}).status_code == 200, moment
    for moment in BEFORE_THE_START:  # from year 2 until now: more buckets than a report draws
        response = client.get("/api/v1/accounting/utilisation/", {"since": moment})
        assert response.status_code == 400 and "at most" in response.json()["since"][0], moment
        assert client.get("/accounting/utilisation/", {"since": moment}).status_code == 400, moment


@pytest.mark.parametrize("moment", FAR_OFFSETS)
@pytest.mark.parametrize("name", ["since", "until"])
def test_an_offset_past_postgresqls_is_read_in_utc_everywhere(alice, api, done, name, moment):
    assert shown_on_every_list(alice, api, {name: moment}) == (ALL_OF_RED if name == "since" else NONE_OF_RED)
    assert reviewed(alice, {name: moment}) == (["red secret retrain"] if name == "since" else [])


def test_the_edges_of_the_calendar_the_site_takes_still_work(alice, api, done):
    assert alice.get("/usage/", {"since": "0002-01-01", "until": "9998-12-31"}).status_code == 200
    assert alice.get("/usage/", {"until": "0002-01-01"}).status_code == 200
    assert alice.get("/usage/", {"since": "9998-12-31"}).status_code == 200
    assert alice.get("/", {"since": "0002-01-01"}).status_code == 200
    assert api.get("/api/v1/jobs/", {"since": "0002-01-01", "until": "9998-12-31"}).json()["count"] == 1


# --- more of what a hostile caller sends ------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/jobs/estimate/", "/api/v1/tokens/"])
def test_a_json_body_nested_past_the_parsers_depth_is_400_not_500(api, path):
    deep = b"[" * 100_000 + b"]" * 100_000
    response = api.generic("POST", path, deep, content_type="application/json")
    assert response.status_code == 400


def test_a_body_of_a_type_the_api_does_not_read_is_415(api):
    response = api.generic("POST", "/api/v1/jobs/", b"<job/>", content_type="application/xml")
    assert response.status_code == 415


def test_a_signed_in_browser_cannot_be_made_to_submit_or_cancel_cross_site(member, waiting, image):
    browser = Client(enforce_csrf_checks=True)  # what a page of another site makes the browser send
    browser.force_login(member)
    assert browser.post("/api/v1/jobs/", body(image), content_type="application/json").status_code == 403
    assert browser.post(f"/api/v1/jobs/{waiting.pk}/cancel/").status_code == 403
    assert browser.post(f"/jobs/{waiting.pk}/cancel/").status_code == 403
    assert browser.post("/api/v1/tokens/", {"name": "for the attacker"}).status_code == 403
    waiting.refresh_from_db()
    assert not waiting.cancel_requested and Job.objects.count() == 2 and not ApiToken.objects.exists()


def test_logging_in_never_redirects_to_another_site(member):
    response = Client().post("/login/?next=https://evil.example/", {"username": "alice", "password": "pw-for-tests-1"})
    assert response.status_code == 302 and "evil.example" not in response["Location"]


def test_the_api_has_no_way_to_change_or_delete_a_job(api, waiting):
    url = f"/api/v1/jobs/{waiting.pk}/"
    assert api.put(url, {"cpus": 64}, format="json").status_code == 405
    assert api.patch(url, {"cpus": 64}, format="json").status_code == 405
    assert api.delete(url).status_code == 405
    waiting.refresh_from_db()
    assert waiting.cpus == 1


def test_a_member_cannot_register_or_delete_a_node_through_the_api(api, local_node):
    assert api.post("/api/v1/pool/nodes/", {"name": "rogue"}, format="json").status_code in (403, 405)
    assert api.delete(f"/api/v1/pool/nodes/{local_node.name}/").status_code in (403, 405)
    assert Node.objects.count() == 1


def test_a_token_is_shown_once_and_never_listed(api, member):
    made = api.post("/api/v1/tokens/", {"name": "cron"}, format="json").json()
    listed = api.get("/api/v1/tokens/").content.decode()
    assert made["key"] and made["key"] not in listed and "digest" not in listed
    assert made["key"] not in api.get(f"/api/v1/tokens/{made['id']}/").content.decode()


def test_the_running_and_waiting_jobs_of_red_are_not_on_eve_s_review(eve, waiting):
    assert "red waiting" not in eve.get("/review/now/").content.decode()
    assert "red waiting" not in eve.get("/").content.decode()


@pytest.mark.parametrize("field", ["command", "env"])
def test_a_field_of_json_nested_past_the_decoders_depth_is_a_field_error(api, alice, image, local_node, field):
    deep = "[" * 4000 + "]" * 4000  # within both fields' lengths
    response = api.post("/api/v1/jobs/", body(image, **{field: deep}), format="json")
    assert response.status_code == 400 and field in response.json()
    assert alice.post("/jobs/new/", body(image, **{field: deep})).status_code == 400
    assert not Job.objects.exists()


def test_a_json_output_nested_past_the_decoders_depth_previews_as_text(alice, done):
    store_output(done, "deep.json", b"[" * 100_000 + b"]" * 100_000)
    response = alice.get(f"/jobs/{done.pk}/preview/deep.json")
    assert response.status_code == 200 and "not valid JSON" in response.content.decode()


@pytest.mark.parametrize(
    "metrics",
    [b"[" * 100_000 + b"]" * 100_000, b'{"loss": 1' + b"0" * 400 + b"}", b'{"loss": Infinity, "acc": NaN}'],
    ids=["nested", "past-a-float", "not-finite"],
)
def test_a_metrics_json_no_chart_can_draw_leaves_the_job_page_whole(alice, member, team, image, local_node, metrics):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now() - timedelta(minutes=1))
    store_output(job, "metrics.json", metrics)
    response = alice.get(f"/jobs/{job.pk}/")
    assert response.status_code == 200 and "<polyline" not in response.content.decode()


@pytest.mark.parametrize(
    "query", [{"since": "0002-01-01", "until": "9998-12-31"}, {"since": "0002-01-01"}, {"until": "9998-12-31"}]
)
def test_a_usage_window_of_millennia_draws_a_bounded_chart(alice, done, query):
    response = alice.get("/usage/", query)  # was 520,000 bars: 54 MB, and a web worker for a minute and more
    assert response.status_code == 200
    assert 0 < response.content.decode().count('<rect class="bar"') <= 520
    assert len(response.content) < 1_000_000

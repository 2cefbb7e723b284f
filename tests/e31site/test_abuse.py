"""Abuse: login guessing locks out an account-and-address pair, the API's request rates, the pages' CSP."""

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from tests.conftest import api_client_for
from tests.factories import submit_job

PASSWORD = "pw-for-tests-1"


def log_in(username: str, password: str, *, address: str = "127.0.0.1") -> Client:
    client = Client(REMOTE_ADDR=address)
    client.response = client.post("/login/", {"username": username, "password": password})
    return client


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def three_tries(settings):
    settings.AXES_FAILURE_LIMIT = 3


def guess(username: str, *, times: int, address: str = "127.0.0.1") -> None:
    for _ in range(times):
        assert not signed_in(log_in(username, "a wrong guess", address=address))


# --- logins --------------------------------------------------------------------------------------------


def test_an_account_is_locked_out_from_an_address_that_guessed_its_password(member, three_tries):
    guess("alice", times=3)

    client = log_in("alice", PASSWORD)

    assert client.response.status_code == 429 and not signed_in(client)
    assert b"Too many failed logins" in client.response.content


def test_fewer_failures_than_the_limit_do_not_lock_out(member, three_tries):
    guess("alice", times=2)

    assert signed_in(log_in("alice", PASSWORD))


def test_the_same_account_still_logs_in_from_another_address(member, three_tries):
    guess("alice", times=5, address="198.51.100.9")

    assert signed_in(log_in("alice", PASSWORD, address="203.0.113.4"))


def test_other_accounts_behind_the_same_address_still_log_in(member, teammate, three_tries):
    guess("alice", times=5)  # one person in the office guessing

    assert signed_in(log_in("bob", PASSWORD))


def test_a_lockout_ends_after_the_cool_off(member, three_tries, settings):
    guess("alice", times=3)
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))

    assert signed_in(log_in("alice", PASSWORD))


def test_an_operator_lifts_a_lockout_with_axes_reset_username(member, three_tries):
    guess("alice", times=3)

    call_command("axes_reset_username", "alice")

    assert signed_in(log_in("alice", PASSWORD))


def test_the_lockout_settings_come_from_the_environment(settings):
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60


# --- API request rates ------------------------------------------------------------------------------------


@pytest.fixture
def rates(settings):
    settings.E31_API_THROTTLE_RATES = {**settings.E31_API_THROTTLE_RATES, "user": "3/min", "anon": "2/min"}


def test_a_person_over_the_rate_gets_429_with_retry_after(member, teammate, rates):
    api = api_client_for(member)

    assert [api.get("/api/v1/jobs/").status_code for _ in range(3)] == [200, 200, 200]
    response = api.get("/api/v1/jobs/")

    assert response.status_code == 429 and "throttled" in response.json()["detail"]
    assert 0 < int(response["Retry-After"]) <= 60
    assert api_client_for(teammate).get("/api/v1/jobs/").status_code == 200  # per person, not per address


def test_a_person_signed_in_through_the_browser_is_counted_too(client, member, rates):
    client.force_login(member)

    assert [client.get("/api/v1/jobs/").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_anonymous_requests_are_counted_per_address(db, rates):
    assert [Client().get("/api/schema/").status_code for _ in range(3)] == [200, 200, 429]
    assert Client(REMOTE_ADDR="10.0.0.5").get("/api/schema/").status_code == 200


# --- Content-Security-Policy ------------------------------------------------------------------------------


class InlineCode(HTMLParser):
    """What a strict policy would block in a page: inline scripts and styles, event-handler attributes,
    and anything loaded from elsewhere than the site (a data: URL included)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script" and not names.get("src") and names.get("type", "text/javascript") != "application/json":
            self.found.append("<script> without src")
        if tag == "style":
            self.found.append("<style>")
        self.found += [f"{name}= on <{tag}>" for name in names if name == "style" or name.startswith("on")]
        if any((value or "").lstrip().lower().startswith("javascript:") for value in names.values()):
            self.found.append(f"javascript: URL on <{tag}>")
        loaded = names.get("src") or (names.get("href") if tag == "link" else None) or ""
        if not loaded.startswith("/"):  # data:, another site: only the site's own files are allowed
            self.found += [f"<{tag}> loading {loaded}"] if loaded else []


@pytest.fixture
def pages(client, member, team, local_node):
    job = submit_job(member, team, name="nightly")
    client.force_login(member)
    return client, ["/", "/jobs/new/", f"/jobs/{job.pk}/", f"/jobs/{job.pk}/live/", "/account/", "/api/docs/"]


def test_every_page_forbids_anything_but_the_sites_own_code(pages):
    client, paths = pages
    for path in [*paths, "/login/"]:
        policy = client.get(path)["Content-Security-Policy"]

        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["default-src"] == "'self'", path
        assert "unsafe" not in policy and "script-src" not in directives and "style-src" not in directives, path
        assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'", path


def test_no_page_has_inline_code_the_policy_would_block(pages):
    client, paths = pages
    for path in paths:
        inline = InlineCode()
        inline.feed(client.get(path).content.decode())
        assert inline.found == [], path
    inline = InlineCode()
    inline.feed(client.post("/jobs/new/", {"name": ""}).content.decode())  # the form with errors
    assert inline.found == []


def test_htmx_is_told_not_to_inject_its_inline_style(pages):
    client, _ = pages

    page = client.get("/").content.decode()

    assert re.search(r"""<meta name="htmx-config" content='\{"includeIndicatorStyles": false\}'>""", page)

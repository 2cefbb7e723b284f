"""The screens no other browser test photographs, checked with axe-core at desktop and phone width under
the site's CSP: with the others (the review, jobs, a job's page, the form, templates, usage, statements,
utilisation, the operator panel, a node, a drain's confirmation), every screen of the site is checked."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from pool.nodes import Capacity, register
from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in
from tests.ops.conftest import released_job

pytestmark = [pytest.mark.browser]


def test_the_login_page_and_a_missing_page(transactional_db, live_server, context):
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    expect(page.get_by_label("Username")).to_be_visible()
    check_screen(page, "login")

    page.goto(f"{live_server.url}/no-such-page/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    check_screen(page, "not-found")
    assert context.csp_violations == []


def test_a_members_statements_account_and_isolation_pages(transactional_db, member, team, live_server, context):
    register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now() - timedelta(days=1))
    released_job(member, team, name="nightly", held_for=timedelta(minutes=5))
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    for path, name, heading in [
        ("/accounting/statements/", "statements", "Statements"),
        ("/account/", "account", "Account"),
        ("/isolation/", "isolation", "Isolation"),
    ]:
        page.goto(f"{base}{path}")
        expect(page.get_by_role("heading", level=1)).to_contain_text(re.compile(heading, re.I))
        check_screen(page, name)
    assert context.csp_violations == []

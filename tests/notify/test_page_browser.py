"""/account/notifications/ in a real browser under the site's CSP: axe-core finds nothing serious at desktop
and phone width; the choices are saved by the form; the unsubscribe link's button stops every mail."""

import pytest
from playwright.sync_api import expect

from notify.links import unsubscribe_url
from notify.models import Preference
from tests.e2e.conftest import context  # noqa: F401 (the browser context fixture, with its CSP reports)
from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in

pytestmark = [pytest.mark.browser]


def test_the_notifications_page_saves_the_choices(transactional_db, member, live_server, context, settings):  # noqa: F811
    settings.EMAIL_HOST = ""  # mail off: the page says so
    page = context.new_page()
    log_in(page, live_server.url, member.username)

    page.goto(f"{live_server.url}/account/notifications/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Notifications")
    expect(page.locator("#mail-off")).to_contain_text("no SMTP server is set: no mail is sent")
    expect(page.locator("#no-address")).to_be_visible()
    check_screen(page, "notifications")

    page.get_by_label("Succeeded").check()
    page.get_by_label("Cancelled").uncheck()
    page.get_by_label("Morning digest").uncheck()
    page.get_by_label("Digest at").select_option("06:00")
    page.get_by_role("button", name="Save").click()

    expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    saved = Preference.objects.get(user=member)
    assert "succeeded" in saved.email_on and "cancelled" not in saved.email_on
    assert (saved.digest, saved.digest_hour) == (False, 6)
    expect(page.get_by_label("Succeeded")).to_be_checked()
    assert context.csp_violations == []


def test_the_unsubscribe_link_stops_every_mail_signed_out(transactional_db, member, live_server, context, settings):  # noqa: F811
    settings.E31_SITE_URL = live_server.url
    page = context.new_page()

    page.goto(unsubscribe_url(member))
    check_screen(page, "unsubscribe")
    page.get_by_role("button", name="Stop my mail").click()

    expect(page.get_by_role("status")).to_contain_text("no more mail")
    saved = Preference.objects.get(user=member)
    assert (saved.email_on, saved.digest) == ([], False)
    assert context.csp_violations == []

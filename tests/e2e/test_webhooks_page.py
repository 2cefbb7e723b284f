"""/account/webhooks/ in a real browser under the site's CSP: a webhook added with htmx (its secret shown
once), its delivery log opened and a delivery sent again, axe-core finding nothing serious."""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in
from tests.webhooks.http_receiver import ALLOWED
from webhooks.delivery import enqueue
from webhooks.models import Delivery, Webhook

pytestmark = [pytest.mark.browser]


def test_add_a_webhook_see_its_secret_once_and_redeliver(
    transactional_db, member, team, live_server, context, settings
):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [ALLOWED]
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/account/webhooks/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Webhooks")

    page.get_by_label("URL").fill("http://127.0.0.1:19009/hook")
    page.get_by_label("job.released").check()
    page.get_by_role("button", name="Add a webhook").click()

    expect(page.locator("#new-webhook")).to_contain_text("copy its secret now")
    webhook = Webhook.objects.get()
    expect(page.locator("code.key")).to_have_text(webhook.secret)
    check_screen(page, "webhooks")

    Delivery.objects.filter(pk=enqueue(team.pk, "job.released", {}, now=timezone.now())[0].pk).update(
        status="failed", status_class="5xx", response_code=500, duration_ms=5000, attempts=12
    )
    page.reload()
    expect(page.locator("code.key")).to_have_count(0)  # never shown again
    page.get_by_role("link", name="Deliveries").click()
    expect(page.locator(f"#log-{webhook.pk}")).to_contain_text(re.compile(r"failed.*500", re.S))
    page.get_by_role("button", name="Redeliver").click()
    expect(page.locator(f"#log-{webhook.pk}")).to_contain_text("Sent again as delivery")
    check_screen(page, "webhook-deliveries")
    assert Delivery.objects.filter(redelivery_of__isnull=False, status="pending").count() == 1
    assert context.csp_violations == []


def test_the_page_says_webhooks_are_off(transactional_db, member, live_server, context, settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/account/webhooks/")

    expect(page.locator("#webhooks-off")).to_contain_text("Webhooks are off on this site")
    expect(page.get_by_role("button", name="Add a webhook")).to_have_count(0)
    check_screen(page, "webhooks-off")

"""/schedules/ in Debian's Chromium, through the live server: a schedule with its sentence, runs, forecast and
audit; paused and resumed by its buttons (htmx swaps the card in place); axe-core finds nothing serious."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from schedules import runs as runs_module
from schedules.changes import create_schedule
from schedules.models import RunStatus, Schedule, ScheduleRun
from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in
from tests.factories import RuntimeImageFactory

pytestmark = [pytest.mark.browser]
JOB = {"name": "nightly", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 60}


def test_a_schedule_is_paused_and_resumed_from_its_card(transactional_db, member, team, live_server, context):
    RuntimeImageFactory(name="busybox")
    now = timezone.now()
    schedule = create_schedule(team=team, name="nightly report", cron="@nightly", time_zone="Europe/Berlin",
                               template=None, job=JOB, by=member, now=now)  # fmt: skip
    ScheduleRun.objects.create(schedule=schedule, planned_at=now - timedelta(days=1), status=RunStatus.REFUSED,
                               reason="Over budget: team red", recorded_at=now)  # fmt: skip
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.get_by_role("link", name="Schedules").click()
    card = page.locator(f"#schedule-{schedule.pk}")
    expect(card).to_contain_text("At 01:00 every day")
    expect(card).to_contain_text("Over budget: team red")
    expect(card).to_contain_text("Forecast this month")
    check_screen(page, "schedules")

    card.get_by_role("button", name="Pause nightly report").click()
    expect(card.get_by_role("button", name="Resume nightly report")).to_be_visible()
    expect(page.locator(f"#schedule-{schedule.pk}-paused")).to_be_visible()
    expect(page.locator("#messages")).to_contain_text("Paused nightly report")
    expect(card).to_contain_text("paused by alice")
    assert Schedule.objects.get(pk=schedule.pk).paused

    card.get_by_role("button", name="Resume nightly report").click()
    expect(card.get_by_role("button", name="Pause nightly report")).to_be_visible()
    expect(card).to_contain_text("resumed by alice")
    assert not Schedule.objects.get(pk=schedule.pk).paused
    assert context.csp_violations == []


def test_a_schedule_made_of_a_jobs_fields_runs_now_and_is_changed(transactional_db, member, team, live_server,
                                                                  context, local_node):  # fmt: skip
    RuntimeImageFactory(name="busybox")
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/schedules/")

    form = page.locator("#new-schedule")
    form.locator("#id_name").fill("hourly check")
    form.locator("#id_cron").fill("@hourly")
    form.locator("#id_job-name").fill("check")
    form.locator("#id_job-image").select_option("busybox")
    form.locator("#id_job-command").fill("true")
    form.get_by_role("button", name="Make the schedule").click()
    expect(page.locator("#messages")).to_contain_text("Made the schedule hourly check.")
    schedule = Schedule.objects.get()
    card = page.locator(f"#schedule-{schedule.pk}")
    expect(card).to_contain_text("Every hour")

    card.get_by_role("button", name="Run hourly check now").click()
    expect(card.get_by_role("link", name="check", exact=True)).to_be_visible()
    expect(page.locator("#messages")).to_contain_text("Ran hourly check now: submitted check, as alice.")

    card.get_by_role("link", name="Change hourly check").click()
    expect(page.locator("#id_job-command")).to_have_value("true")
    check_screen(page, "schedule-edit")
    page.locator("#id_cron").fill("15 * * * *")
    page.get_by_role("button", name="Save the changes").click()
    expect(page.locator("#messages")).to_contain_text("Changed the schedule hourly check.")
    expect(page.locator(f"#schedule-{schedule.pk}")).to_contain_text("At 15 minutes past the hour")
    assert context.csp_violations == []


def test_delete_asks_first_on_a_page_of_its_own(transactional_db, member, team, live_server, context):
    RuntimeImageFactory(name="busybox")
    now = timezone.now()
    schedule = create_schedule(team=team, name="nightly report", cron="@nightly", time_zone="UTC", template=None,
                               job=JOB, by=member, now=now)  # fmt: skip
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/schedules/")
    card = page.locator(f"#schedule-{schedule.pk}")

    card.get_by_role("link", name="Delete nightly report").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Delete the schedule nightly report?")
    expect(page.locator("#delete-consequence")).to_contain_text("It has submitted no job yet")
    check_screen(page, "schedule-delete")
    page.get_by_role("link", name="No, back to the schedules").click()
    expect(card).to_be_visible()
    assert Schedule.objects.filter(pk=schedule.pk).exists()

    card.get_by_role("link", name="Delete nightly report").click()
    page.get_by_role("button", name="Yes, delete nightly report").click()
    expect(page.locator("#messages")).to_contain_text("Deleted the schedule nightly report: the jobs it submitted")
    expect(card).to_have_count(0)
    expect(page.get_by_text("deleted by alice")).to_be_visible()
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
    assert context.csp_violations == []


def test_run_now_on_a_paused_schedule_and_a_failing_platform_say_so_on_the_page(
    transactional_db, member, team, live_server, context, local_node, monkeypatch
):
    RuntimeImageFactory(name="busybox")
    schedule = create_schedule(team=team, name="nightly report", cron="@nightly", time_zone="UTC", template=None,
                               job=JOB, paused=True, by=member, now=timezone.now())  # fmt: skip
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/schedules/")
    card = page.locator(f"#schedule-{schedule.pk}")
    expect(card).to_contain_text("The schedule stays paused.")
    check_screen(page, "schedules-paused")

    card.get_by_role("button", name="Run nightly report once now").click()
    expect(page.locator("#messages")).to_contain_text(
        "Ran nightly report once now: submitted nightly, as alice. nightly report stays paused"
    )
    expect(card.get_by_role("link", name="nightly", exact=True)).to_be_visible()
    expect(page.locator(f"#schedule-{schedule.pk}-paused")).to_be_visible()
    assert Schedule.objects.get(pk=schedule.pk).paused

    def broken(schedule, *, planned_at):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(runs_module, "submit_run", broken)  # the live server's thread reads the same module
    card.get_by_role("button", name="Run nightly report once now").click()
    expect(page.locator("#messages")).to_contain_text(
        "nightly report was not run now: Not submitted: the platform failed (RuntimeError); it is logged."
    )
    expect(card).to_contain_text("Not submitted: the platform failed (RuntimeError)")
    assert context.csp_violations == []

"""/usage/ and /usage.csv asked for a moment, not only a day: "since 18:00 yesterday" typed as a day and a time in
the viewer's team zone (a date alone is still its midnight), the jobs ended in a window as the morning review sums
them, the chart drawn by hour over a short window; an end at or before its start is a 400 on the form."""

import csv
import io
import re
import zoneinfo
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from accounting.models import Record
from jobs.models import Outcome
from ops import usage
from tests.factories import ended_job

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
MORNING = datetime(2030, 3, 12, 8, 30, tzinfo=PARIS)  # the frozen "now" (Paris is UTC+1 until the 31st)
EVENING = datetime(2030, 3, 11, 18, 0, tzinfo=PARIS)


@pytest.fixture
def evening(member, paris, image, local_node):
    """Jobs submitted around 18:00 Paris time (17:00 UTC), each run for 10 minutes after a 2 minute wait."""
    ran, waited = timedelta(minutes=10), timedelta(minutes=2)

    def job(name: str, submitted: datetime, **kwargs):
        return ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=submitted + waited + ran, name=name, **kwargs)

    return {
        "before": job("before six", EVENING - timedelta(minutes=30)),  # 17:30 Paris, 16:30 UTC
        "after": job("after six", EVENING + timedelta(minutes=30), cpus=2),  # 18:30 Paris, 17:30 UTC
        "night": job("at night", EVENING + timedelta(hours=5)),  # 23:00 Paris
    }


def look(client, member, path: str, data: dict | None = None):
    """The page as the member sees it on the frozen morning."""
    with time_machine.travel(MORNING, tick=False):
        client.force_login(member)
        return client.get(path, data)


def names(page: str) -> list[str]:
    return re.findall(r'<td data-label="Job"><a href="/jobs/[^"]+/">([^<]+)</a>', page)


def exact_total(page: str) -> Decimal:
    found = re.search(r'<dd id="total-cost" title="exact: ([0-9.]+)">', page)
    assert found, "no total cost on the page"
    return Decimal(found.group(1))


def input_value(page: str, name: str) -> str:
    found = re.search(rf'<input type="datetime-local" name="{name}" value="([^"]*)"', page)
    assert found, f"no datetime-local input {name}"
    return found.group(1)


def test_since_a_time_is_read_in_the_viewers_zone_and_selects_the_jobs_and_totals(client, member, evening):
    response = look(client, member, "/usage/", {"since": "2030-03-11T18:00"})

    page = response.content.decode()
    assert response.status_code == 200
    assert names(page) == ["at night", "after six"]  # 17:30 Paris is before; 18:00 UTC would drop "after six"
    assert '<dd id="total-jobs">2</dd>' in page
    records = Record.objects.filter(job__in=[evening["after"], evening["night"]])
    assert exact_total(page) == sum(r.cost for r in records)
    assert input_value(page, "since") == "2030-03-11T18:00"
    assert "A day and a time, in Europe/Paris." in page


def test_a_date_alone_is_still_its_midnight_and_shown_as_one(client, member, evening):
    page = look(client, member, "/usage/", {"until": "2030-03-11"}).content.decode()

    assert names(page) == []  # every job was submitted on the 11th, after its midnight
    assert input_value(page, "until") == "2030-03-11T00:00"
    page = look(client, member, "/usage/", {"since": "2030-03-11"}).content.decode()
    assert names(page) == ["at night", "after six", "before six"]


def test_a_moment_sent_otherwise_shows_in_the_form_as_the_zones_day_and_time(client, member, evening):
    page = look(client, member, "/usage/", {"since": "2030-03-11T17:00:00Z", "until": "9h"}).content.decode()

    assert input_value(page, "since") == "2030-03-11T18:00"  # 17:00 UTC is 18:00 in Paris
    assert input_value(page, "until") == "2030-03-11T23:30"  # 9 hours before 08:30
    assert names(page) == ["at night", "after six"]


def test_the_jobs_ended_in_a_window_are_those_the_review_sums(client, member, evening):
    # "before six" ended at 17:42 Paris, "after six" at 18:42, "at night" at 23:12.
    page = look(client, member, "/usage/", {"ended_since": "2030-03-11T18:00", "ended_until": "2030-03-11T23:00"})

    assert names(page.content.decode()) == ["after six"]
    assert exact_total(page.content.decode()) == Record.objects.get(job=evening["after"]).cost


@pytest.mark.parametrize(
    ("query", "field", "said"),
    [
        ({"since": "2030-03-11T18:00", "until": "2030-03-11T17:59"}, "until", "“Submitted from”"),
        ({"since": "2030-03-11T18:00", "until": "2030-03-11T18:00"}, "until", "“Submitted from”"),
        ({"ended_since": "2030-03-12", "ended_until": "2030-03-11T23:00"}, "ended_until", "“Ended from”"),
    ],
)
def test_an_end_at_or_before_its_start_is_400_on_the_form(client, member, evening, query, field, said):
    response = look(client, member, "/usage/", query)

    page = response.content.decode()
    assert response.status_code == 400
    assert "A filter has a bad value." in page
    assert f"Enter a moment after the one in {said}." in page
    assert f'<div class="error" id="id_{field}_error">' in page  # beside its field
    assert names(page) == []
    csv_answer = look(client, member, "/usage.csv", query)
    assert csv_answer.status_code == 400
    assert f"{field}: Enter a moment after the one in {said}." in csv_answer.content.decode()


@pytest.mark.parametrize("raw", ["2030-03-11T25:00", "2030-02-30T18:00", "18:00", "+275760-09-13T00:00"])
@pytest.mark.parametrize("name", ["since", "ended_until"])
def test_a_bad_moment_is_400_naming_it_and_shown_as_typed(client, member, evening, name, raw):
    response = look(client, member, "/usage/", {name: raw})

    page = response.content.decode()
    assert response.status_code == 400
    assert re.search(rf"<li>[^<]+ \({name}\): Enter a valid date/time.</li>", page)
    # A text box: a browser would empty a datetime-local box of a value it cannot read.
    assert re.search(rf'<input type="text" name="{name}" value="{re.escape(raw)}"', page)
    assert look(client, member, "/usage.csv", {name: raw}).status_code == 400


def test_the_csv_takes_the_moment_too(client, member, evening):
    response = look(client, member, "/usage.csv", {"since": "2030-03-11T18:00", "until": "2030-03-11T20:00"})

    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row[1] for row in rows[1:]] == ["after six"]


def test_a_short_window_is_drawn_by_hour_from_the_hour_it_starts(client, member, evening):
    page = look(client, member, "/usage/", {"since": "2030-03-11T18:00"}).content.decode()

    assert "Core-hours held per hour" in page
    bars = re.findall(r"<title>(\d\d-\d\d \d\d:\d\d): ([^<]+)</title>", page)
    # From 18:00 Paris to 08:30: 15 bars, labelled in Paris time; "after six" held 2 cores 18:32 to 18:42.
    assert [label for label, _ in bars] == [f"03-11 {h}:00" for h in range(18, 24)] + [
        f"03-12 0{h}:00" for h in range(9)
    ]
    assert bars[0][1] == "0.33 core-hours"


def test_the_hourly_chart_spreads_a_hold_over_its_hours(member, paris, image, local_node):
    with time_machine.travel(MORNING, tick=False):
        job = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(minutes=90),
                        ran=timedelta(minutes=60), waited=timedelta(0), name="over an hour's edge", cpus=2)  # fmt: skip
        records = Record.objects.filter(job=job)
        with timezone.override(PARIS):
            chart = usage.over_time(records, start=EVENING, end=EVENING + timedelta(hours=3), now=timezone.now())

    # Held 18:30 to 19:30 on 2 cores: an hour of core-time in each of two hours.
    assert [(bar.label, round(bar.amount, 3)) for bar in chart.bars] == [
        ("03-11 18:00", 1.0), ("03-11 19:00", 1.0), ("03-11 20:00", 0.0),
    ]  # fmt: skip

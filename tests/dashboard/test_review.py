"""The morning review at `/`: what ended since a time (failures first, with why), counts by outcome,
what runs and waits; under a frozen clock (time-machine) with jobs of every outcome."""

import html
import re
import zoneinfo
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from accounting.meter import Usage
from accounting.models import Record
from dashboard.review import default_since
from jobs.lifecycle.actions import schedule_pass, start_run
from jobs.models import Dependency, Job, Outcome
from pool.nodes import Capacity, register
from tests.factories import ended_job, store_output, submit_job, waiting_on_upstreams

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
MORNING = datetime(2030, 3, 12, 8, 30, tzinfo=PARIS)  # the frozen "now" of the review
EVENING = datetime(2030, 3, 11, 18, 0, tzinfo=PARIS)  # its default start: 18:00 the day before


@pytest.fixture
def me(client, member):
    return client, member


def look(me, path: str = "/", data: dict | None = None, **extra):
    """The page as the member sees it on the frozen morning (signed in then: a session made today
    would have expired by 2030)."""
    client, user = me
    with time_machine.travel(MORNING, tick=False):
        client.force_login(user)
        return client.get(path, data, **extra)


@pytest.fixture
def night(member, paris, image, local_node):
    """A night of jobs of every outcome, and one that ended before the evening."""
    made = {
        "before": ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING - timedelta(hours=1), exit_code=3,
                            name="yesterday's failure"),
        "ok": ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=2), name="convert",
                        usage=Usage(cpu_seconds=590.0, memory_peak_mb=60)),
        "failed": ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(hours=3), exit_code=2,
                            reason="exit code 2", name="retrain"),
        "oom": ended_job(member, paris, outcome=Outcome.OUT_OF_MEMORY, at=EVENING + timedelta(hours=4),
                         reason="killed by the memory limit", exit_code=137, name="big join"),
        "timeout": ended_job(member, paris, outcome=Outcome.TIMED_OUT, at=EVENING + timedelta(hours=5),
                             reason="past its time limit", name="simulation"),
        "lost": ended_job(member, paris, outcome=Outcome.NODE_LOST, at=EVENING + timedelta(hours=6), name="render"),
        "cancelled": ended_job(member, paris, outcome=Outcome.CANCELLED, at=EVENING + timedelta(hours=7),
                               ran=timedelta(0), name="typo"),
        "rejected": ended_job(member, paris, outcome=Outcome.REJECTED, at=EVENING + timedelta(hours=8),
                              name="too big"),
        "idle": ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=9),
                          usage=Usage(cpu_seconds=6.0, memory_peak_mb=8), cpus=1, memory_mb=64, name="lazy"),
    }  # fmt: skip
    store_output(made["ok"], "result.csv", b"a,b\n1,2\n")
    store_output(made["ok"], "model.json", b'{"w": 1}')
    return made


def ended_names(response) -> list[str]:
    return re.findall(r'<a class="job-link" href="/jobs/[^"]+/"><strong>([^<]*)</strong>', response.content.decode())


def test_the_default_start_is_18h_the_day_before_in_the_teams_zone():
    assert default_since(MORNING, PARIS) == EVENING
    assert default_since(datetime(2030, 3, 12, 21, 0, tzinfo=PARIS), PARIS) == EVENING  # an evening look too
    # 07:30 UTC is already the 12th in Tokyo: its evening before is the 11th, 18:00 Tokyo time.
    tokyo = zoneinfo.ZoneInfo("Asia/Tokyo")
    assert default_since(datetime(2030, 3, 11, 23, 30, tzinfo=zoneinfo.ZoneInfo("UTC")), tokyo) == datetime(
        2030, 3, 11, 18, 0, tzinfo=tokyo
    )


def test_the_review_lists_what_ended_overnight_failures_first(me, night):
    response = look(me)

    assert response.status_code == 200
    names = ended_names(response)
    # Failures first (latest first among them), then the rest; yesterday's failure is before the evening.
    assert names == ["too big", "render", "simulation", "big join", "retrain", "lazy", "typo", "convert"]
    page = response.content.decode()
    assert "yesterday&#x27;s failure" not in page
    assert 'class="exit-code">137</strong> · killed by the memory limit' in page
    assert 'class="exit-code">2</strong></p>' in page  # the reason 'exit code 2' is not said twice


def test_a_failure_is_a_card_with_wait_run_time_cost_outputs_and_efficiency(me, member, paris, image, local_node):
    job = ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(hours=1), exit_code=1,
                    name="convert", usage=Usage(cpu_seconds=590.0, memory_peak_mb=60))  # fmt: skip
    store_output(job, "result.csv", b"a,b\n1,2\n")
    store_output(job, "model.json", b'{"w": 1}')

    page = look(me).content.decode()

    card = page[page.index(">convert<") :]
    card = card[: card.index("\n    </li>")]  # the card's end (its run strip has items of its own)
    assert "<dt>queue wait</dt><dd>2 m 00 s</dd>" in card
    assert "<dt>run time</dt><dd>10 m 00 s</dd>" in card
    assert re.search(r'<dd class="cost">\d+\.\d\d EUR</dd>', card)
    assert "<dd>2 · 16\xa0bytes</dd>" in card  # two outputs, 16 bytes in all
    assert "98.3 %" in card and "93.8 %" in card  # 590 of 600 cpu-seconds; 60 of 64 MB
    assert "over-asked" not in card
    assert f'href="/jobs/{job.pk}/outputs.zip"' in card


def success_line(page: str, name: str) -> str:
    line = page[page.rindex('<li class="ended-line"', 0, page.index(f">{name}<")) :]
    return line[: line.index("\n    </li>")]


def test_a_success_is_one_line_with_run_time_cost_outputs_and_its_history(me, night):
    page = look(me).content.decode()

    convert = success_line(page, "convert")
    assert "queue wait" not in convert and "<dl" not in convert  # no card of figures
    assert '<span title="run time">10 m 00 s</span>' in convert
    assert re.search(r'<span class="cost" title="cost">\d+\.\d\d EUR</span>', convert)
    assert f'href="/jobs/{night["ok"].pk}/outputs.zip"' in convert and "2 outputs, 16\xa0bytes" in convert
    assert "run-strip" not in convert  # its one run is no history (the next test has a name's)
    lazy = success_line(page, "lazy")
    # its 8 of 64 MB peak names the smaller request that would have done (a 1-cpu job cannot ask for less cpu)
    assert "Asked for more than it used: 16 MB would have done." in lazy and "cpu" not in lazy
    assert page.count("Asked for more than it used") == 1  # convert used what it asked


def test_a_smaller_request_is_said_once_per_name_on_its_newest_run(me, member, paris, image, local_node):
    for hour in range(3):
        ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=hour + 1), name="nightly",
                  usage=Usage(cpu_seconds=6.0, memory_peak_mb=8), cpus=1, memory_mb=64)  # fmt: skip
    newest = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=5), name="nightly",
                       usage=Usage(cpu_seconds=6.0, memory_peak_mb=8), cpus=1, memory_mb=64)  # fmt: skip

    page = look(me).content.decode()

    assert page.count("Asked for more than it used: 16 MB would have done.") == 1
    lines = re.findall(r'<li class="ended-line".*?\n    </li>', page, re.S)
    assert len(lines) == 4 and f'href="/jobs/{newest.pk}/"' in lines[0]  # the newest first, and it says it
    assert "Asked for more than it used" in lines[0]
    assert all('aria-label="The last 4 runs of nightly, oldest first"' in line for line in lines)


def test_the_night_is_summed_before_the_first_card(me, member, paris, image, night):
    # The window before, as long as this one (18:00 to 08:30): 14 h 30 m earlier, two failures, one success.
    for hours, outcome in [(1, Outcome.FAILED), (2, Outcome.FAILED), (3, Outcome.SUCCEEDED)]:
        ended_job(member, paris, outcome=outcome, at=EVENING - timedelta(hours=hours), name=f"before {hours}")
    ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING - timedelta(hours=15), name="longer ago")

    page = look(me).content.decode()

    summary = page[page.index('id="night-sum"') : page.index("</div>", page.index('id="night-sum"'))]
    assert page.index('id="night-sum"') < page.index('<li class="ended-job')
    change = r'<li data-outcome="(\w+)">.*?</strong> [^<]+</span> <span class="change"[^>]*>\(([^)]+)\)'
    counted = dict(re.findall(change, summary))
    said = re.findall(r"<strong>(\d+)</strong> ([^<]+)</span>", summary)
    # yesterday's failure (17:00), before 1 and before 2 were before; longer ago is out of both windows
    assert ("1", "failed") in said and counted["failed"] == "-2"
    assert ("2", "succeeded") in said and counted["succeeded"] == "+1"
    assert ("1", "out of memory") in said and counted["out_of_memory"] == "+1"
    assert ("1", "cancelled") in said and ("1", "timed out") in said
    cost = re.search(r'<strong class="sum-cost" title="(\d+\.\d{6}) EUR exactly">(\d+\.\d\d) EUR</strong>', summary)
    assert cost and Decimal(cost.group(1)).quantize(Decimal("0.01")) == Decimal(cost.group(2))
    records = Record.objects.filter(job__in=[job for key, job in night.items() if key != "before"])
    assert Decimal(cost.group(1)) == sum(r.cost for r in records)
    held = sum(r.held_seconds * r.cpus for r in records) / 3600
    assert f"{held.quantize(Decimal('0.01'))} core-hours held" in summary
    used = sum(r.cpu_seconds for r in records) / 3600
    assert f"{used.quantize(Decimal('0.01'))} core-hours used" in summary


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ({}, {"ok", "failed", "oom", "timeout", "lost", "cancelled", "rejected", "idle"}),
        ({"since": "2030-03-11T20:30", "until": "2030-03-12T00:00"}, {"failed", "oom", "timeout"}),  # 21:00 to 23:00
    ],
)
def test_the_nights_cost_links_to_the_usage_of_its_window_whose_total_is_that_cost(me, night, query, shown):
    page = look(me, "/", query).content.decode()

    link = re.search(r'<a id="night-cost" href="([^"]+)"><strong class="sum-cost" title="(\d+\.\d{6}) EUR exactly">',
                     page)  # fmt: skip
    assert link, "the cost is no link"
    href = html.unescape(link.group(1))
    since = "2030-03-11T18%3A00%3A00%2B01%3A00" if not query else "2030-03-11T20%3A30%3A00%2B01%3A00"
    assert href.startswith(f"/usage/?ended_since={since}")
    assert ("&ended_until=2030-03-12T00%3A00%3A00%2B01%3A00" in href) == bool(query)
    usage = look(me, href).content.decode()
    total = re.search(r'<dd id="total-cost" title="exact: ([0-9.]+)">', usage)
    assert total and Decimal(total.group(1)) == Decimal(link.group(2)) > 0
    listed = set(re.findall(r'<td data-label="Job"><a href="/jobs/[^"]+/">([^<]+)</a>', usage))
    assert listed == {night[key].name for key in shown}


def test_a_failure_a_resubmission_fixed_says_so_after_the_open_ones(me, member, paris, image, night):
    again = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=10), name="join 2")
    Job.objects.filter(pk=again.pk).update(resubmitted_from=night["oom"])

    response = look(me)

    # big join (out of memory at 22:00) would come before retrain (21:00): fixed, it comes after the open ones.
    assert ended_names(response)[:5] == ["too big", "render", "simulation", "retrain", "big join"]
    page = response.content.decode()
    card = page[page.index(">big join<") :]
    assert f'fixed by <a href="/jobs/{again.pk}/">join 2</a>' in card[: card.index("\n    </li>")]


def needs_a_look(response) -> list[tuple[str, str]]:
    """The open failures named under the sum: each one's link target and name."""
    page = response.content.decode()
    part = page[page.index('<div class="sum-failures">') :]
    return re.findall(r'<li><a href="#([^"]+)">([^<]*)</a>', part[: part.index("</ul>")])


def test_the_open_failures_are_named_under_the_sum_each_linking_its_card(me, member, paris, image, night):
    again = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=10), name="join 2")
    Job.objects.filter(pk=again.pk).update(resubmitted_from=night["oom"])

    response = look(me)

    named = needs_a_look(response)
    # In the cards' order; the fixed one (big join) and what did not fail are not named.
    assert [name for _, name in named] == ["too big", "render", "simulation", "retrain"]
    page = response.content.decode()
    for anchor, _ in named:
        assert page.count(f'id="{anchor}"') == 1
    assert page.index('<div class="sum-failures">') < page.index('<li class="ended-job')


def test_a_pipeline_is_named_when_a_failure_broke_it_not_a_cancel(me, member, paris, image, local_node):
    def pipeline(first: str, outcome: str) -> None:
        upstream = ended_job(member, paris, outcome=outcome, at=EVENING + timedelta(hours=1), name=first)
        downstream = ended_job(member, paris, outcome=Outcome.CANCELLED, at=EVENING + timedelta(hours=2),
                               name=f"after {first}")  # fmt: skip
        Dependency.objects.create(job=downstream, on_job=upstream, kind=Dependency.Kind.OK)

    pipeline("extract", Outcome.FAILED)
    pipeline("typo", Outcome.CANCELLED)  # someone cancelled it

    assert [name for _, name in needs_a_look(look(me))] == ["extract"]


def test_a_night_without_failures_names_none(me, member, paris, image, local_node):
    ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=2), name="convert")

    assert "Needs a look" not in look(me).content.decode()


def test_the_counts_by_outcome_cover_24_hours_7_and_30_days(me, member, paris, image, night):
    ended_job(member, paris, outcome=Outcome.FAILED, at=MORNING - timedelta(days=3), name="earlier this week")
    ended_job(member, paris, outcome=Outcome.FAILED, at=MORNING - timedelta(days=20), name="earlier this month")
    ended_job(member, paris, outcome=Outcome.FAILED, at=MORNING - timedelta(days=40), name="long ago")

    page = look(me).content.decode()

    counts = {
        outcome: [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', row)]
        for outcome, row in re.findall(r'<tr data-outcome="(\w*)">(.*?)</tr>', page)
    }
    assert counts["failed"] == [2, 3, 4]  # retrain and yesterday's (24 h), + 3 days ago, + 20 days ago
    assert counts["succeeded"] == [2, 2, 2] and counts["node_lost"] == [1, 1, 1]
    assert counts[""] == [9, 10, 11]


def test_since_and_until_choose_the_window(me, night):
    response = look(me, "/", {"since": "2030-03-11T22:30:00+01:00", "until": "2030-03-12T01:30:00+01:00"})

    assert ended_names(response) == ["render", "simulation", "typo"]  # ended 23:00, 00:00, 01:00


@pytest.mark.parametrize("query", ["since=yesterday", "until=2030-13-01", "since=12:00"])
def test_a_bad_time_is_400_and_named(me, db, query):
    response = look(me, f"/?{query}")

    assert response.status_code == 400
    assert query.split("=")[0] in response.content.decode()


def test_running_jobs_show_their_progress_and_waiting_jobs_their_place(me, member, paris, image, local_node):
    cores = len(local_node.cpu_ids)
    with time_machine.travel(MORNING - timedelta(minutes=5), tick=False):
        running = submit_job(member, paris, image=image, name="long run", cpus=cores, time_limit_s=600)
        schedule_pass()
        running.refresh_from_db()
        assert start_run(running, now=MORNING - timedelta(minutes=5))
        waiting = submit_job(member, paris, image=image, name="next in line", cpus=1)
        schedule_pass()

    page = look(me).content.decode()

    assert '<progress max="600" value="300"' in page and "5 m 00 s of 10 m 00 s (50 %)" in page
    waiting.refresh_from_db()
    assert waiting.queue_position == 1 and waiting.wait_reason
    row = page[page.index(">next in line<") - 200 :]
    assert '<td class="num">1</td>' in row and waiting.wait_reason[:20] in page


@pytest.mark.parametrize("count", [1, 15])
def test_the_waiting_list_names_each_upstream_in_queries_that_do_not_grow_with_them(
    me, member, team, image, count, django_assert_max_num_queries
):
    register("wide", Capacity(cpu_ids=list(range(16)), memory_mb=16384, gpu_ids=[]), now=timezone.now())
    waiting = waiting_on_upstreams(member, team, image=image, count=count)
    client, user = me
    client.force_login(user)

    # The session, its user, their teams, the waiting jobs, the jobs their reasons name, the arrays, the running.
    with django_assert_max_num_queries(7):
        page = client.get("/review/now/", HTTP_HX_REQUEST="true").content.decode()

    for job in waiting:
        upstream = job.dependencies.get().on_job
        assert f'waits for job <a href="/jobs/{upstream.pk}/">{upstream.name}</a> to succeed' in page


def test_the_review_polls_its_running_part(me, db):
    response = look(me, "/review/now/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and b'id="review-now"' in response.content
    assert b"<html" not in response.content


def test_another_teams_jobs_are_not_in_my_review(client, outsider, night):
    response = look((client, outsider))

    assert response.status_code == 200 and ended_names(response) == []


def test_the_review_needs_a_login(client, db):
    assert client.get("/")["Location"] == "/login/?next=/"


@pytest.mark.parametrize("count", [1, 60])
def test_the_review_query_count_does_not_grow_with_the_jobs(
    me, member, paris, image, local_node, count, django_assert_max_num_queries
):
    for i in range(count):
        job = ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(minutes=i + 1), name=f"j{i}")
        store_output(job, "out.txt", b"x")

    client, user = me
    with time_machine.travel(MORNING, tick=False):
        client.force_login(user)
        # 19: the arrays' and the links' ids are read before their rows (dashboard.review.pipelines_of), the
        # maintenance windows coming are one more, and the night's summary one.
        with django_assert_max_num_queries(19):
            response = client.get("/")

    assert response.status_code == 200 and len(ended_names(response)) == min(count, 25)


def test_a_time_without_an_offset_is_read_in_the_teams_zone_and_shown_there(me, night):
    response = look(me, "/", {"since": "2030-03-11T22:30", "until": "2030-03-12T01:30"})

    assert ended_names(response) == ["render", "simulation", "typo"]
    assert 'value="2030-03-11T22:30"' in response.content.decode()


# --- why it failed, and the name's history -----------------------------------------------------------


def test_a_failed_card_says_why_in_the_jobs_own_words(me, member, paris, image, local_node):
    ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(hours=1), exit_code=3,
              reason="exit code 3", name="load", log=b"ok\nERROR: upstream table <missing>\n")  # fmt: skip

    page = look(me).content.decode()

    card = page[page.index(">load<") :]
    card = card[: card.index("\n    </li>")]
    assert 'class="exit-code">3</strong></p>' in card
    excerpt = re.search(r'<pre class="excerpt-text"[^>]*>(.*?)</pre>', card, re.S)
    assert excerpt and excerpt.group(1) == "ok\nERROR: upstream table &lt;missing&gt;"  # escaped, not markup
    assert "Last lines of its log" in card


def test_the_failures_lead_the_page_before_the_window_form_and_the_counts(me, night):
    page = look(me).content.decode()

    first_failure = page.index('class="ended-job failure"')
    assert first_failure < page.index('id="counts"')
    assert page.index('<details class="review-since"') < first_failure  # folded to one line above them
    assert '<details class="review-since" open' not in page


def test_a_bad_window_opens_the_form_to_mend_it(me, db):
    response = look(me, "/?since=yesterday")

    assert response.status_code == 400 and '<details class="review-since" open>' in response.content.decode()


def test_each_card_shows_its_names_last_runs(me, member, paris, image, local_node):
    for hour in range(3):
        ended_job(member, paris, outcome=Outcome.SUCCEEDED if hour < 2 else Outcome.FAILED, exit_code=1 if hour == 2
                  else None, at=EVENING + timedelta(hours=hour + 1), name="nightly")  # fmt: skip

    page = look(me).content.decode()

    strips = re.findall(r'<ol aria-label="The last (\d+) runs of nightly, oldest first">(.*?)</ol>', page, re.S)
    assert [n for n, _ in strips] == ["3", "3", "3"]  # a card per run, each with the name's three
    outcomes = [re.findall(r'class="run outcome-(\w+)', cells) for _, cells in strips]
    assert outcomes == [["succeeded", "succeeded", "failed"]] * 3
    assert [cells.count(" current") for _, cells in strips] == [1, 1, 1]
    assert 'tabindex="-1"' in strips[0][1]  # ten cells per card are no tab stops


def test_a_cards_run_history_is_its_names_last_ten_runs_and_the_job_page_keeps_thirty(
    me, member, paris, image, local_node
):
    made = [ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING - timedelta(days=14 - day), name="nightly")
            for day in range(14)]  # fmt: skip
    made.append(ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(hours=1), name="nightly"))

    review = look(me).content.decode()
    job_page = look(me, f"/jobs/{made[-1].pk}/").content.decode()

    assert 'aria-label="The last 10 runs of nightly, oldest first"' in review
    assert 'aria-label="The last 15 runs of nightly, oldest first"' in job_page


@pytest.mark.parametrize("names", [1, 12])
def test_the_strips_are_one_query_whatever_the_cards(
    me, member, paris, image, local_node, names, django_assert_max_num_queries
):
    for n in range(names):
        for run in range(3):
            ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(minutes=10 * n + run + 1),
                      name=f"name {n}", exit_code=1, log=b"boom\n")  # fmt: skip

    client, user = me
    with time_machine.travel(MORNING, tick=False):
        client.force_login(user)
        with django_assert_max_num_queries(17):  # with the maintenance windows coming and the night's summary
            response = client.get("/")

    assert response.status_code == 200 and len(ended_names(response)) == min(3 * names, 25)
    assert response.content.decode().count('<div class="run-strip">') == min(3 * names, 25)

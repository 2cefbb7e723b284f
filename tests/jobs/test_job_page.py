"""The job page's new parts: the timeline, the appending log, previews, the zip of all outputs,
metrics over runs, and resubmit."""

import io
import json
import re
import zipfile
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.core.files.storage import default_storage
from django.http import Http404
from django.utils import timezone
from django.utils.html import escape
from django.views import defaults

from accounting.meter import Usage
from accounting.models import Budget, BudgetUnit
from core.when import BAD_DURATION
from jobs.lifecycle import actions
from jobs.models import Job, Outcome, Stage
from jobs.storage import logs, retention
from jobs.storage.store import data_key
from jobs.web import previews
from tests.factories import ended_job, store_output, submit_job, upload

HTMX = {"HTTP_HX_REQUEST": "true"}
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def done(member, team, image, local_node):
    """A released job with outputs of every kind."""
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now() - timedelta(minutes=1),
                    usage=Usage(cpu_seconds=100.0, memory_peak_mb=10), name="nightly retrain",
                    log_notes=["released"])  # fmt: skip
    store_output(job, "notes.txt", b"<script>alert(1)</script> plain text")
    store_output(job, "table.csv", b"epoch,loss\n1,0.5\n2,0.25\n")
    store_output(job, "model.json", b'{"w":[1,2]}')
    store_output(job, "plot.png", PNG)
    store_output(job, "fake.png", b"<svg onload=alert(1)>")
    store_output(job, "page.html", b"<script>alert(1)</script>")
    return job


def test_the_timeline_shows_each_steps_own_duration_under_it(me, done):
    page = me.get(f"/jobs/{done.pk}/").content.decode()

    took = r'<span class="took" data-took><span class="took-words">([^<]+)</span>([^<]+)</span>'
    steps = re.findall(rf'data-step="(\w+)".*?(?:{took}|</li>)', page, re.S)
    assert [s for s, _, _ in steps] == ["submit", "rent", "run", "output", "release"]
    assert {step: words + said for step, words, said in steps} == {
        "submit": "", "rent": "queue wait 2 m 00 s", "run": "run time 10 m 00 s", "output": "collection 0 s",
        "release": "in all 12 m 00 s",
    }  # fmt: skip
    assert page.count("Times in UTC") == 1  # moments are in the team's zone, named once on the page


def test_the_log_lines_come_from_the_offset_and_the_poller_moves_on(me, job_at):
    job = job_at(Stage.RUN)
    logs.append(job.pk, 0, b"epoch 1\nepoch 2\n")

    first = me.get(f"/jobs/{job.pk}/log/lines/?offset=0&line=1", **HTMX).content.decode()
    assert re.findall(r'<span class="l" id="L(\d+)"><a class="ln" href="#L\1"[^>]*></a>([^<]*)</span>', first) == [
        ("1", "epoch 1\n"), ("2", "epoch 2\n")]  # fmt: skip
    assert 'id="log-poller" hx-swap-oob="true"' in first and "offset=16&amp;line=3" in first
    assert 'hx-swap="beforeend"' in first

    logs.append(job.pk, 16, b"epoch 3\npartial")
    second = me.get(f"/jobs/{job.pk}/log/lines/?offset=16&line=3", **HTMX).content.decode()
    assert second.startswith('<span class="l" id="L3">') and 'epoch 3\n</span><span id="log-poller"' in second
    assert "offset=24&amp;line=4" in second  # whole lines only
    assert "epoch 1" not in second


def test_log_lines_asked_without_a_line_number_count_the_lines_before(me, job_at):
    job = job_at(Stage.RUN)
    logs.append(job.pk, 0, b"one\ntwo\nthree\n")

    answer = me.get(f"/jobs/{job.pk}/log/lines/?offset=8", **HTMX).content.decode()

    assert '<span class="l" id="L3">' in answer and "three" in answer and "offset=14&amp;line=4" in answer


def test_the_rest_of_a_line_over_one_answer_is_not_numbered_again(me, job_at):
    job = job_at(Stage.RUN)
    logs.append(job.pk, 0, b"one\nlong line\nnext\n")

    answer = me.get(f"/jobs/{job.pk}/log/lines/?offset=8&line=2", **HTMX).content.decode()

    assert answer.startswith('<span class="l"> line\n</span><span class="l" id="L3">')
    assert '<span class="l" id="L3">' in answer and 'id="L2"' not in answer


@pytest.mark.parametrize("line", ["0", "x", "-3"])
def test_a_bad_log_line_number_is_400(me, done, line):
    assert me.get(f"/jobs/{done.pk}/log/lines/?offset=0&line={line}").status_code == 400


def test_the_page_numbers_the_logs_tail_from_the_logs_start(me, job_at, monkeypatch):
    from jobs.web import job_page

    monkeypatch.setattr(job_page, "LOG_TAIL_BYTES", 49)
    job = job_at(Stage.RUN)
    text = b"".join(f"line {i:03}\n".encode() for i in range(1, 21))  # 9 bytes a line: the tail holds 4 and a half
    logs.append(job.pk, 0, text + b"not ended")

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    assert re.findall(r'id="L(\d+)"', page) == ["17", "18", "19", "20"]
    assert 'id="L17"><a class="ln" href="#L17"' in page and "line 017" in page
    assert "not ended" not in page  # a running job's last line comes whole with the next poll
    assert "The end of the log, from line 17" in page
    assert f"offset={len(text)}&amp;line=21" in page


def test_the_poller_stops_once_the_job_is_released_and_read(me, done):
    answer = me.get(f"/jobs/{done.pk}/log/lines/?offset=0", **HTMX).content.decode()

    assert '<span class="sys">[e31] released\n</span>' in answer
    assert "hx-trigger" not in answer


@pytest.mark.parametrize("offset", ["-1", "x", str(2**63)])
def test_a_bad_log_offset_is_400(me, done, offset):
    assert me.get(f"/jobs/{done.pk}/log/lines/?offset={offset}").status_code == 400


@pytest.mark.parametrize("offset", [2**44, 2**63 - 1])
def test_an_offset_far_past_the_end_of_a_sealed_log_gives_no_lines_and_stops(me, done, offset):
    response = me.get(f"/jobs/{done.pk}/log/lines/?offset={offset}", **HTMX)

    assert response.status_code == 200
    assert (
        response.content.decode().startswith('<span id="log-poller"') and "hx-trigger" not in response.content.decode()
    )


def test_text_csv_and_json_outputs_preview_escaped_in_the_page(me, done):
    text = me.get(f"/jobs/{done.pk}/preview/notes.txt").content.decode()
    table = me.get(f"/jobs/{done.pk}/preview/table.csv").content.decode()
    data = me.get(f"/jobs/{done.pk}/preview/model.json").content.decode()

    assert "&lt;script&gt;alert(1)&lt;/script&gt; plain text" in text and "<script>" not in text
    assert '<th scope="col">epoch</th><th scope="col">loss</th>' in table and "<td>0.25</td>" in table
    assert "&quot;w&quot;: [\n    1,\n    2\n  ]" in data


def test_a_png_output_is_shown_inline_sandboxed_and_only_a_real_png(me, done):
    preview = me.get(f"/jobs/{done.pk}/preview/plot.png").content.decode()
    image = me.get(f"/jobs/{done.pk}/image/plot.png")

    assert f'<img src="/jobs/{done.pk}/image/plot.png"' in preview
    assert image.status_code == 200 and image["Content-Type"] == "image/png" and image.content == PNG
    assert image["X-Content-Type-Options"] == "nosniff" and "sandbox" in image["Content-Security-Policy"]
    assert me.get(f"/jobs/{done.pk}/image/fake.png").status_code == 404  # named .png, not one
    assert "<img" not in me.get(f"/jobs/{done.pk}/preview/fake.png").content.decode()


def test_an_html_output_is_never_served_as_html(me, done):
    response = me.get(f"/jobs/{done.pk}/outputs/page.html")

    assert "html" not in response["Content-Type"] and response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"].startswith("attachment") and "sandbox" in response["Content-Security-Policy"]


def test_download_all_streams_a_zip_of_every_output(me, done):
    response = me.get(f"/jobs/{done.pk}/outputs.zip")

    assert response.status_code == 200 and response.streaming and response["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert sorted(archive.namelist()) == ["fake.png", "model.json", "notes.txt", "page.html", "plot.png", "table.csv"]
    assert archive.read("table.csv") == b"epoch,loss\n1,0.5\n2,0.25\n" and archive.testzip() is None


def test_a_job_without_outputs_has_no_zip(me, job_at):
    assert me.get(f"/jobs/{job_at(Stage.SUBMIT).pk}/outputs.zip").status_code == 404


def test_metrics_are_shown_and_charted_over_the_same_named_jobs_runs(me, member, team, image, local_node):
    now = timezone.now()
    for i, loss in enumerate([0.9, 0.5, 0.3]):
        job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(hours=3 - i), name="nightly")
        store_output(job, "metrics.json", json.dumps({"loss": loss, "epochs": 10, "note": "text is left out"}).encode())
    other = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(minutes=90), name="other")
    store_output(other, "metrics.json", b'{"loss": 99}')

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    assert 'aria-label="loss over 3 runs: 0.9, 0.5, 0.3"' in page
    assert 'aria-label="epochs over 3 runs: 10.0, 10.0, 10.0"' in page
    metrics = page[page.index('id="metrics"') :].split("</section>")[0]  # the section alone (timestamps elsewhere)
    assert "note" not in re.findall(r"<figcaption><code>(\w+)</code>", page) and "99" not in metrics
    assert page.count("<polyline") == 2 and page.count("<circle") == 2  # the dot: this run, seen even alone


def test_a_metrics_json_of_15000_numbers_charts_only_the_first_few_and_says_so(me, member, team, local_node):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), name="wide")
    store_output(job, "metrics.json", json.dumps({f"m{i:05}": i for i in range(15_000)}).encode())

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    assert page.count("<polyline") == previews.METRIC_SERIES
    assert "<code>m00000</code>" in page and f"<code>m{previews.METRIC_SERIES:05}</code>" not in page
    assert f"Only the first {previews.METRIC_SERIES} of its 15000 numbers are charted." in page
    assert len(page) < 200_000


def test_metrics_as_far_apart_as_a_float_goes_are_drawn_without_nan(me, member, team, local_node):
    now = timezone.now()
    for i, value in enumerate([-1e308, 1e308, 0]):
        job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(hours=3 - i), name="far")
        store_output(job, "metrics.json", json.dumps({"x": value, "y": 1}).encode())

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    metrics = page[page.index('id="metrics"') :].split("</section>")[0]
    assert "nan" not in metrics.lower() and "inf" not in metrics.lower()
    points = re.search(r'<polyline points="([^"]+)"', metrics).group(1)
    assert points == "4.0,44.0 120.0,4.0 236.0,24.0"


def test_resubmit_is_prefilled_and_reuses_the_data_files_from_the_store(me, member, team, image, local_node):
    earlier = submit_job(member, team, image=image, name="convert", command="python3 /data/run.py --fast",
                         files={"run.py": "print(1)", "big.csv": "a,b\n"}, cpus=1, memory_mb=128,
                         time_limit_s=5400, outputs=["out/*.csv"], env={"MODE": "x"})  # fmt: skip

    form = me.get(f"/jobs/{earlier.pk}/resubmit/").content.decode()
    assert 'value="convert"' in form and "sh -c &#x27;python3 /data/run.py --fast&#x27;" in form
    assert 'value="5400"' in form and "out/*.csv" in form and "MODE" in form
    assert 'name="reuse" value="big.csv"' in form and 'name="reuse" value="run.py"' in form

    response = me.post(f"/jobs/{earlier.pk}/resubmit/", {
        "name": "convert again", "image": image.name, "command": "python3 /data/run.py", "env": "",
        "cpus": "1", "memory_mb": "128", "gpus": "0", "time_limit_s": "2h", "outputs": "",
        "reuse": ["run.py"],
    })  # fmt: skip

    new = Job.objects.exclude(pk=earlier.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{new.pk}/"
    assert new.name == "convert again" and new.time_limit_s == 7200
    assert [f.name for f in new.data_files.all()] == ["run.py"]
    with default_storage.open(data_key(new.pk, "run.py"), "rb") as copied:
        assert copied.read() == b"print(1)"
    follow = me.get(response["Location"]).content.decode()
    assert "Submitted again as a new job" in follow  # the message after the action


def test_resubmit_with_bad_values_keeps_them_and_says_why(me, member, team, image, local_node):
    earlier = submit_job(member, team, image=image, name="convert")

    response = me.post(
        f"/jobs/{earlier.pk}/resubmit/",
        {
            "name": "kept",
            "image": image.name,
            "command": "true",
            "cpus": "1",
            "memory_mb": "64",
            "time_limit_s": "soon",
        },
    )

    assert response.status_code == 400 and 'value="kept"' in response.content.decode()
    assert escape(BAD_DURATION) in response.content.decode() and Job.objects.count() == 1


@pytest.fixture
def expired(member, team, image, local_node, settings):
    """A released job whose data files retention has deleted."""
    settings.E31_RETENTION_DAYS = 1
    released = timezone.now() - timedelta(days=2)
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=released, image=image, name="convert",
                    files={"run.py": "print(1)", "big.csv": "a,b\n"})  # fmt: skip
    assert [j.pk for j in retention.delete_due(now=timezone.now())] == [job.pk]
    job.refresh_from_db()
    return job


def resubmitted(**changes) -> dict:
    return {"name": "again", "image": "busybox", "command": "python3 /data/run.py", "cpus": "1", "memory_mb": "64",
            "time_limit_s": "60", **changes}  # fmt: skip


def test_resubmit_of_a_job_whose_files_retention_deleted_says_to_attach_them_again(me, expired):
    form = me.get(f"/jobs/{expired.pk}/resubmit/").content.decode()

    day = f"{timezone.localtime(expired.files_deleted_at):%Y-%m-%d}"
    assert f"big.csv, run.py: deleted from the store on {day}" in form and "Attach them again" in form
    assert "checked" not in form.split('id="id_reuse"')[1].split("</div>")[0]  # not offered
    response = me.post(f"/jobs/{expired.pk}/resubmit/", resubmitted(reuse=["run.py"]))
    assert response.status_code == 400
    assert f"run.py: deleted from the store on {day}" in response.content.decode()
    assert "Attach it again under Data files." in response.content.decode()
    assert Job.objects.count() == 1


def test_resubmit_takes_a_deleted_file_attached_again(me, expired):
    attached = upload("run.py", "print(2)")

    response = me.post(f"/jobs/{expired.pk}/resubmit/", resubmitted(reuse=["run.py"], data=[attached]))

    new = Job.objects.exclude(pk=expired.pk).get()
    assert response.status_code == 302 and [f.name for f in new.data_files.all()] == ["run.py"]


def test_resubmit_of_a_file_missing_from_the_store_is_refused_not_a_500(me, member, team, image, local_node):
    earlier = submit_job(member, team, image=image, name="convert", files={"run.py": "print(1)"})
    default_storage.delete(data_key(earlier.pk, "run.py"))  # gone while retention was deleting it, say

    response = me.post(f"/jobs/{earlier.pk}/resubmit/", resubmitted(reuse=["run.py"]))

    assert response.status_code == 400
    assert "run.py: deleted from the store, when the earlier job" in response.content.decode()
    assert Job.objects.count() == 1


def test_resubmit_over_the_budget_is_refused_on_the_form_in_the_apis_words(
    me, member, team, image, local_node, settings
):
    settings.E31_HOLD_OVERHEAD_S = 0  # worst cases of whole hours, for readable figures
    earlier = submit_job(member, team, image=image, name="convert", cpus=1, time_limit_s=3600)
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("2"))  # 1 committed already

    response = me.post(f"/jobs/{earlier.pk}/resubmit/", {
        "name": "again", "image": image.name, "command": "true", "cpus": "2", "memory_mb": "64",
        "time_limit_s": "1h", "submission": "b" * 32,
    })  # fmt: skip

    page = response.content.decode()
    assert response.status_code == 402 and "Over budget: team red" in page and "1.00 core-hours more" in page
    assert 'value="again"' in page  # what was typed is kept
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    "suffix", ["", "live/", "log/lines/", "preview/notes.txt", "image/plot.png", "outputs.zip", "resubmit/"]
)
def test_a_member_of_another_team_gets_404_on_every_job_page(client, outsider, done, suffix):
    client.force_login(outsider)

    assert client.get(f"/jobs/{done.pk}/{suffix}").status_code == 404


def test_the_job_pages_404_is_the_sites_styled_page(client, outsider, done):
    client.force_login(outsider)

    page = client.get(f"/jobs/{done.pk}/").content.decode()

    assert "Nothing here" in page and 'class="skip"' in page and "e31.css" in page


def test_the_live_part_answers_204_while_nothing_it_shows_changed(me, job_at):
    job = job_at(Stage.RENT)
    live = me.get(f"/jobs/{job.pk}/live/", **HTMX).content.decode()
    [url] = re.findall(r'hx-get="([^"]+)"', live)

    assert me.get(url, **HTMX).status_code == 204  # unchanged: nothing swapped, focus and selection kept
    actions.start_run(job, now=timezone.now())
    changed = me.get(url, **HTMX)
    assert changed.status_code == 200 and 'data-stage="run"' in changed.content.decode()


@pytest.mark.parametrize(
    ("handler", "status", "text"),
    [("permission_denied", 403, "Not allowed"), ("page_not_found", 404, "Nothing here"),
     ("server_error", 500, "Something broke on our side")],
)  # fmt: skip
def test_the_error_pages_are_the_sites_own(rf, db, handler, status, text):
    request = rf.get("/somewhere/")
    view = getattr(defaults, handler)
    response = (
        view(request) if handler == "server_error" else view(request, {403: PermissionDenied, 404: Http404}[status]())
    )

    page = response.content.decode()
    assert response.status_code == status and text in page
    assert 'class="skip" href="#main"' in page and "/static/e31.css" in page


def test_a_change_of_step_is_announced_to_screen_readers(me, job_at):
    job = job_at(Stage.RENT)
    page = me.get(f"/jobs/{job.pk}/").content.decode()
    assert '<p id="live-status" class="visually-hidden" aria-live="polite"></p>' in page

    actions.start_run(job, now=timezone.now())
    live = me.get(f"/jobs/{job.pk}/live/", **HTMX).content.decode()

    assert re.search(r'<p id="live-status"[^>]*hx-swap-oob="true">[^<]*: run\.</p>', live)


def test_a_resubmit_form_sent_twice_makes_one_job(me, member, team, image, local_node):
    earlier = submit_job(member, team, image=image, name="convert")
    form = me.get(f"/jobs/{earlier.pk}/resubmit/").content.decode()
    [submission] = re.findall(r'name="submission" value="([0-9a-f]{32})"', form)
    sent = {"name": "again", "image": image.name, "command": "true", "cpus": "1", "memory_mb": "64",
            "time_limit_s": "60", "submission": submission}  # fmt: skip

    first = me.post(f"/jobs/{earlier.pk}/resubmit/", sent)
    second = me.post(f"/jobs/{earlier.pk}/resubmit/", sent)

    assert first["Location"] == second["Location"] and Job.objects.filter(name="again").count() == 1


def test_the_log_marks_what_came_from_stderr_on_the_page_and_in_the_lines(me, job_at):
    job = job_at(Stage.RUN)
    logs.append(job.pk, 0, b"out\n<err>\n", stderr=[(4, 10)])

    page = me.get(f"/jobs/{job.pk}/").content.decode()
    lines = me.get(f"/jobs/{job.pk}/log/lines/?offset=0", **HTMX).content.decode()

    assert "</a>out\n</span>" in page and '</a><span class="err">&lt;err&gt;\n</span></span>' in page
    assert 'class="log-legend-err">stderr<' in page
    assert '<span class="l" id="L2"><a class="ln" href="#L2" data-n="2" tabindex="-1" aria-hidden="true"></a>' in lines
    assert '</a><span class="err">&lt;err&gt;\n</span></span>' in lines

"""The job page leads with the run: outcome and excerpt, steps, the clock and usage while it runs, then the log
(numbered lines), then outputs, record and history folded below; commands shown with their shell quoting."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from jobs.models import Job, Outcome, Stage
from jobs.storage import logs
from jobs.templatetags.commands import command, shell
from tests.factories import ended_job

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def order_of(page: str, *markers: str) -> list[int]:
    return [page.index(marker) for marker in markers]


def test_an_ended_jobs_page_shows_outcome_and_excerpt_then_steps_then_log_then_the_folded_rest(me, member, team,
                                                                                              local_node):  # fmt: skip
    job = ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now(), exit_code=3, reason="exit code 3",
                    log=b"ERROR: upstream table missing\n")  # fmt: skip
    Job.objects.filter(pk=job.pk).update(failure_excerpt="ERROR: upstream table missing")

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    positions = order_of(page, 'id="outcome"', 'class="excerpt"', 'class="steps"', 'id="log"', 'id="record-fold"',
                         'id="history-fold"', 'id="declared-fold"')  # fmt: skip
    assert positions == sorted(positions), positions
    assert re.search(r'<details class="card fold" id="(record|history|declared)-fold">', page)
    assert 'id="record-fold" open' not in page and 'id="declared-fold" open' not in page


def test_the_step_a_job_ended_at_is_marked_in_words_not_only_colour(me, member, team, local_node):
    job = ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now(), exit_code=3)

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    marked = re.findall(r'<li class="[^"]*\bended ended-failed"[^>]*data-step="(\w+)"', page)
    assert marked == ["run"]
    assert '<span class="ended-here">failed here</span>' in page


def test_a_running_jobs_outputs_card_waits_until_there_are_outputs(me, job_at):
    page = me.get(f"/jobs/{job_at(Stage.RUN).pk}/").content.decode()

    assert 'id="outputs-h"' not in page
    assert page.index('id="log"') < page.index('id="live-after"')


def test_a_running_job_shows_elapsed_and_remaining_time_and_says_when_it_is_not_sampled_yet(me, job_at):
    job = job_at(Stage.RUN, time_limit_s=600)
    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(seconds=150))

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    assert re.search(r'id="elapsed">2 m 3\d s</strong>', page)
    assert re.search(r'data-tick="down" data-seconds="4[45]\d" id="remaining">7 m [0-3]\d s</strong>', page)
    assert re.search(r"left of its time limit of\s+10 m 00 s", re.sub(r"<[^>]+>", "", page))
    assert "cpu and memory: not sampled yet" in page


def test_a_running_job_shows_its_last_usage_sample_and_a_new_sample_refreshes_the_live_part(me, job_at):
    job = job_at(Stage.RUN, cpus=1, memory_mb=64)
    live = me.get(f"/jobs/{job.pk}/live/", **HTMX).content.decode()
    [url] = re.findall(r'hx-get="([^"]+)"', live)
    assert me.get(url, **HTMX).status_code == 204

    sampled = timezone.now() - timedelta(seconds=3)
    Job.objects.filter(pk=job.pk).update(usage_now={"cpu_percent": 87.2, "memory_mb": 41.4, "at": sampled.isoformat()})
    changed = me.get(url, **HTMX)

    assert changed.status_code == 200
    text = re.sub(r"<[^>]+>", "", changed.content.decode())
    assert re.search(r"cpu 87 % of 1 cpu · memory 41 of 64 MB · sampled [34] s ago", text), text


def test_the_live_part_brings_the_part_below_the_log_out_of_band(me, job_at):
    live = me.get(f"/jobs/{job_at(Stage.RUN).pk}/live/", **HTMX).content.decode()

    assert '<div id="live-after" hx-swap-oob="true">' in live and 'id="history-fold"' in live


def test_a_one_line_script_is_shown_as_written_not_shell_quoted(me, member, team, image, local_node):
    argv = ["sh", "-c", "echo starting export; ls '/data/my files'", "sh", "a b"]
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), image=image, command=argv)

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    ref = '<a href="#script-1" class="script-ref">‹script below›</a>'
    assert f'<code class="command" id="command">sh -c {ref} sh {escape(chr(39) + "a b" + chr(39))}</code>' in page
    block = page[page.index('id="script-1"') : page.index("</figure>", page.index('id="script-1"'))]
    assert "1 line" in block
    assert re.findall(r"<li><code>(.*?)</code></li>", block) == [escape("echo starting export; ls '/data/my files'")]
    assert escape("'\"'\"'") not in page


def test_a_script_argument_is_shown_as_numbered_lines_under_the_command(me, member, team, image, local_node):
    script = "set -e\necho 'one'\npython3 /data/run.py --fast\n"
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), image=image,
                    command=["sh", "-c", script])  # fmt: skip

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    ref = '<a href="#script-1" class="script-ref">‹script below›</a>'
    assert f'<code class="command" id="command">sh -c {ref}</code>' in page
    block = page[page.index('id="script-1"') : page.index("</figure>", page.index('id="script-1"'))]
    assert "3 lines" in block
    assert re.findall(r"<li><code>(.*?)</code></li>", block) == ["set -e", "echo &#x27;one&#x27;",
                                                                "python3 /data/run.py --fast"]  # fmt: skip


def test_the_command_filters_quote_as_a_shell_reads_back():
    argv = ["python3", "-c", "import sys\nprint(sys.argv)\n", "a b", "it's"]

    shown = command(argv)

    assert shell(argv) == shown.whole == "python3 -c 'import sys\nprint(sys.argv)\n' 'a b' \"it's\""
    assert shown.parts == [("python3 -c", 0), ("", 1), ("'a b' \"it's\"", 0)]
    assert shown.scripts == [["import sys", "print(sys.argv)"]]
    assert command(["true"]).parts == [("true", 0)] and command(["true"]).scripts == []
    assert command(["sh", "-c", 'echo "it\'s"']).scripts == [['echo "it\'s"']]
    for argv in (["gcc", "-c", "main.c"], ["git", "-c", "user.name=x", "commit"], ["tar", "-c", "dir"]):
        assert command(argv).scripts == [] and command(argv).parts == [(shell(argv), 0)]  # -c takes no script
    assert command(["/bin/bash", "-c", "ls"]).scripts == [["ls"]]


def test_log_pieces_are_cut_into_numbered_lines_across_streams():
    pieces = [("out 1\nout ", ""), ("err\nerr 2\n", "err"), ("[e31] note\n", "sys")]

    lines = logs.numbered(pieces, 7)

    assert [(line.number, line.pieces) for line in lines] == [
        (7, [("out 1\n", "")]),
        (8, [("out ", ""), ("err\n", "err")]),
        (9, [("err 2\n", "err")]),
        (10, [("[e31] note\n", "sys")]),
    ]
    assert [line.number for line in logs.numbered([("rest\nnext\n", "")], 4, continues=True)] == [None, 4]


def test_lines_before_an_offset_are_counted_in_a_live_log_and_a_sealed_one(job_at):
    job = job_at(Stage.RUN)
    logs.append(job.pk, 0, b"a\nb\n")
    logs.append(job.pk, 4, b"c\nd\n")

    live = [logs.lines_before(job.pk, offset) for offset in (0, 1, 2, 5, 6, 8)]
    logs.seal(job.pk)
    sealed = [logs.lines_before(job.pk, offset) for offset in (0, 1, 2, 5, 6, 8)]

    assert live == sealed == [0, 0, 1, 2, 3, 4]

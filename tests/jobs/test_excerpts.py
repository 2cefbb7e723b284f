"""A job's failure excerpt (jobs.lifecycle.excerpts): which lines, within which bounds, made safe; kept at the
release."""

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.lifecycle import actions, excerpts
from jobs.lifecycle.excerpts import CUT, MAX_BYTES, MAX_LINES, TAIL_BYTES, excerpt
from jobs.lifecycle.history import REAPER
from jobs.models import Job, LogSpan, Outcome
from jobs.storage import logs
from tests.factories import submit_job
from tests.jobs.conftest import T0, collecting, held, running

ERR, SYS = LogSpan.Stream.STDERR, LogSpan.Stream.SYSTEM


def of(data: bytes, *, stderr: list[tuple[int, int]] = (), system: list[tuple[int, int]] = (), offset: int = 0) -> str:
    spans = [(s, e, ERR) for s, e in stderr] + [(s, e, SYS) for s, e in system]
    return excerpt(data, offset, sorted(spans))


# --- which lines -----------------------------------------------------------------------------------


def test_the_excerpt_is_the_last_stderr_lines_not_what_stdout_wrote_after():
    data = b"loading\nERROR: upstream table missing\nbye\n"
    start = data.index(b"ERROR")

    assert of(data, stderr=[(start, start + len(b"ERROR: upstream table missing\n"))]) == (
        "ERROR: upstream table missing"
    )


def test_without_stderr_the_excerpt_is_the_jobs_last_lines_not_the_platforms():
    data = b"step 1\nstep 2 failed\n[e31] stopped: past its time limit\n"
    note = data.index(b"[e31]")

    assert of(data, system=[(note, len(data))]) == "step 1\nstep 2 failed"


def test_the_platforms_lines_are_the_excerpt_when_the_job_wrote_nothing():
    data = b"[e31] node-1 was lost\n"

    assert of(data, system=[(0, len(data))]) == "[e31] node-1 was lost"


def test_nothing_written_is_an_empty_excerpt():
    assert of(b"") == ""
    assert of(b"\n\n   \n") == ""


# --- bounds ----------------------------------------------------------------------------------------


def test_at_most_the_last_ten_lines():
    data = b"".join(f"line {i}\n".encode() for i in range(25))

    shown = of(data, stderr=[(0, len(data))])

    assert MAX_LINES == 10
    assert shown.splitlines() == [f"line {i}" for i in range(15, 25)]


def test_at_most_2_kb_the_last_lines_first():
    data = b"".join(f"{i}:{'x' * 500}\n".encode() for i in range(10))

    shown = of(data, stderr=[(0, len(data))])

    assert len(shown.encode()) <= MAX_BYTES == 2048
    assert shown.splitlines()[-1].startswith("9:") and shown.splitlines()[-4].startswith("6:")
    assert "5:" not in shown


def test_a_1_mb_stderr_line_is_cut_to_its_end_and_marked():
    line = b"A" * (1024 * 1024 - 20) + b" the real end here\n"

    shown = of(line, stderr=[(0, len(line))])

    assert len(shown.encode()) <= MAX_BYTES
    assert shown.startswith(CUT) and shown.endswith("the real end here")
    assert len(shown.encode()) > MAX_BYTES - 8  # the room is used, not wasted


def test_a_line_cut_mid_character_keeps_whole_characters():
    line = ("é" * 3000).encode()

    shown = of(line, stderr=[(0, len(line))])

    assert shown.startswith(CUT) and set(shown[1:]) == {"é"} and len(shown.encode()) <= MAX_BYTES


def test_a_long_earlier_line_is_cut_to_the_room_the_last_lines_leave():
    data = b"B" * 5000 + b"\nlast\n"

    shown = of(data, stderr=[(0, len(data))])

    first, last = shown.splitlines()
    assert last == "last" and first.startswith(CUT + "BBB") and len(shown.encode()) <= MAX_BYTES


def test_binary_bytes_are_replaced_and_controls_dropped():
    data = b"\x00\x01bin\xff\xfe\x07ary\x1b(B \tend\x7f\xc2\x9b\n"  # the last, U+009B (a C1 CSI)

    shown = of(data, stderr=[(0, len(data))])

    assert shown == "bin\ufffd\ufffdary \tend"  # the tab kept; NUL, SOH, BEL, DEL, C1 and ESC ( B gone
    assert not any(ord(c) < 32 and c != "\t" for c in shown)


def test_ansi_colours_titles_and_cursor_moves_are_stripped():
    data = b"\x1b[1;31mERROR\x1b[0m: \x1b]0;title\x07disk full\x1b[K\n\x1b[2J\x1b[Hdone\n"

    assert of(data, stderr=[(0, len(data))]) == "ERROR: disk full\ndone"


def test_a_progress_bar_shows_what_its_carriage_returns_left():
    data = b"10%\r50%\r100%\rERROR: checksum mismatch\r\n"

    assert of(data, stderr=[(0, len(data))]) == "ERROR: checksum mismatch"


def test_bidirectional_overrides_are_dropped():
    data = "ok \u202eevil\u202c\n".encode()

    assert of(data, stderr=[(0, len(data))]) == "ok evil"


def test_a_tail_read_from_the_middle_of_a_line_marks_that_line_cut():
    assert of(b"end of a long line\nnext\n", stderr=[(100, 124)], offset=100) == f"{CUT}end of a long line\nnext"


# --- kept at the release ---------------------------------------------------------------------------


def test_a_failed_job_keeps_its_last_stderr_lines_from_its_sealed_log(member, team, image, local_node):
    job = collecting(running(held(submit_job(member, team, image=image))), outcome=Outcome.FAILED, exit_code=3)
    logs.append(job.pk, 0, b"ok\nERROR: upstream table missing\n", stderr=[(3, 33)])

    actions.release(job, outcome=Outcome.FAILED, reason="exit code 3", exit_code=3, now=T0 + timedelta(minutes=2))

    assert logs.is_sealed(job.pk)
    assert Job.objects.get(pk=job.pk).failure_excerpt == "ERROR: upstream table missing"


def test_the_release_notes_are_the_excerpt_of_a_job_that_wrote_nothing(member, team, image, local_node):
    job = collecting(running(held(submit_job(member, team, image=image))), outcome=Outcome.FAILED, exit_code=1)

    actions.release(job, outcome=Outcome.FAILED, reason="", now=T0 + timedelta(minutes=2), log_notes=["no /output"])

    assert Job.objects.get(pk=job.pk).failure_excerpt == "[e31] no /output"


def test_a_succeeded_job_keeps_no_excerpt(member, team, image, local_node):
    job = collecting(running(held(submit_job(member, team, image=image))))
    logs.append(job.pk, 0, b"warning: deprecated\n", stderr=[(0, 20)])

    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=T0 + timedelta(minutes=2))

    assert Job.objects.get(pk=job.pk).failure_excerpt == ""


def test_a_job_lost_with_its_node_keeps_the_excerpt_of_its_live_log(member, team, image, local_node):
    job = running(held(submit_job(member, team, image=image)))
    logs.append(job.pk, 0, b"Traceback\nKeyError: 'x'\n", stderr=[(0, 23)])

    actions.release_lost(job, node_name=local_node.name, last_heartbeat=T0, now=T0 + timedelta(minutes=5), actor=REAPER)

    assert Job.objects.get(pk=job.pk).failure_excerpt == "Traceback\nKeyError: 'x'"


def test_only_the_logs_tail_is_read(member, team, image, local_node):
    job = collecting(running(held(submit_job(member, team, image=image))), outcome=Outcome.FAILED, exit_code=1)
    early = b"ERROR: early, long before the end\n"
    filler = b"." * (TAIL_BYTES + 10) + b"\nlast words\n"
    logs.append(job.pk, 0, early + filler, stderr=[(0, len(early))])

    actions.release(job, outcome=Outcome.FAILED, reason="", now=T0 + timedelta(minutes=2))

    # The early stderr is past the tail: the job's last lines say what they can.
    assert Job.objects.get(pk=job.pk).failure_excerpt.endswith("\nlast words")
    assert excerpts.of_log(job.pk).endswith("last words")


def test_the_excerpt_is_read_before_the_release_locks_the_ledger(member, team, image, local_node):
    """Every release on the platform waits for the ledger's row: no log is read while it is held."""
    job = collecting(running(held(submit_job(member, team, image=image))), outcome=Outcome.FAILED, exit_code=3)
    logs.append(job.pk, 0, b"ERROR: upstream table missing\n", stderr=[(0, 30)])

    with CaptureQueriesContext(connection) as queries:
        actions.release(job, outcome=Outcome.FAILED, reason="exit code 3", exit_code=3, now=T0 + timedelta(minutes=2))

    sql = [q["sql"] for q in queries]
    ledger = next(i for i, q in enumerate(sql) if "accounting_ledger" in q and "FOR UPDATE" in q)
    assert not [q for q in sql[ledger:] if "jobs_logspan" in q or "jobs_logchunk" in q]
    assert Job.objects.get(pk=job.pk).failure_excerpt == "ERROR: upstream table missing"


def test_a_released_job_keeps_no_live_usage(member, team, image, local_node):
    job = running(held(submit_job(member, team, image=image)))
    Job.objects.filter(pk=job.pk).update(usage_now={"cpu_percent": 90.0, "memory_mb": 12, "at": "2026-01-01T00:00:00Z"})

    actions.release_lost(job, node_name=local_node.name, last_heartbeat=T0, now=T0 + timedelta(minutes=5), actor=REAPER)

    assert Job.objects.get(pk=job.pk).usage_now is None

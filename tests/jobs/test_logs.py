"""The log store: live chunks while a job runs, the sealed file afterwards, read back by offset."""

import pytest
from django.core.files.storage import default_storage

from jobs.models import LogChunk, LogSpan
from jobs.storage import logs
from jobs.storage.logs import append_line, read_log, seal
from jobs.storage.store import log_key


@pytest.fixture
def job(member, team, image):
    from tests.factories import submit_job

    return submit_job(member, team, image=image)


def chunks(job) -> list[tuple[int, bytes]]:
    return [(c.offset, bytes(c.data)) for c in LogChunk.objects.filter(job=job).order_by("offset")]


def test_append_line_adds_a_line_of_the_systems_own_after_the_log(job):
    logs.append(job.pk, 0, b"output\n")

    append_line(job.pk, "refused outputs: passwd (symlink)")

    expected = b"output\n[e31] refused outputs: passwd (symlink)\n"
    assert read_log(job.pk) == (expected, len(expected))


def test_an_append_repeated_after_a_dropped_connection_adds_nothing(job):
    logs.append(job.pk, 0, b"output\n")

    logs.append(job.pk, 0, b"output\n")  # the node's second try: the first got through

    assert chunks(job) == [(0, b"output\n")]


def test_end_is_the_offset_after_the_last_chunk(job):
    assert logs.end(job.pk) == 0
    logs.append(job.pk, 0, b"output\n")
    logs.append(job.pk, 7, b"more\n")

    assert logs.end(job.pk) == 12


def test_append_line_starts_an_empty_log(job):
    append_line(job.pk, "hello")

    assert chunks(job) == [(0, b"[e31] hello\n")]


def test_read_log_from_an_offset_inside_a_chunk(job):
    append_line(job.pk, "one")  # 10 bytes
    append_line(job.pk, "two")

    assert read_log(job.pk, 6) == (b"one\n[e31] two\n", 20)
    assert read_log(job.pk, 10) == (b"[e31] two\n", 20)


def test_read_log_at_or_past_the_end_returns_nothing_new(job):
    append_line(job.pk, "one")

    assert read_log(job.pk, 10) == (b"", 10)
    assert read_log(job.pk, 500) == (b"", 500)


def test_read_log_returns_at_most_the_limit_and_where_to_continue(job):
    for n in range(5):
        append_line(job.pk, f"line {n}")  # 13 bytes each

    data, next_offset = read_log(job.pk, 0, limit=20)
    rest, end = read_log(job.pk, next_offset, limit=1000)

    assert (len(data), next_offset) == (20, 20)
    assert data + rest == b"".join(f"[e31] line {n}\n".encode() for n in range(5)) and end == 65


def tail(job, size: int = 64 * 1024) -> str:
    return "".join(text for text, _ in logs.tail_pieces(job.pk, size)[0])


def stderr_spans(job, start: int, end: int) -> list[tuple[int, int]]:
    return [(s, e) for s, e, stream in logs.marked_spans(job.pk, start, end) if stream == LogSpan.Stream.STDERR]


def test_tail_is_the_last_whole_lines_of_the_log_as_text(job):
    for n in range(3):
        append_line(job.pk, f"line {n}")

    assert tail(job, size=14) == "[e31] line 2\n"
    assert tail(job).count("\n") == 3


def test_tail_replaces_bytes_that_are_not_utf8(job):
    LogChunk.objects.create(job=job, offset=0, data=b"caf\xc3\xa9 \xff\n")

    assert tail(job) == "café \ufffd\n"


# --- the sealed log ----------------------------------------------------------------------------------


def sealed(job, content: bytes) -> None:
    logs.append(job.pk, logs.end(job.pk), content)
    seal(job.pk)


def test_sealing_stores_the_whole_log_and_drops_the_live_chunks(job):
    logs.append(job.pk, 0, b"the whole log\n")
    append_line(job.pk, "a note")

    seal(job.pk)

    assert chunks(job) == []
    assert default_storage.open(log_key(job.pk)).read() == b"the whole log\n[e31] a note\n"


def test_a_sealed_log_is_read_from_the_store_by_offset(job):
    sealed(job, b"0123456789")

    assert read_log(job.pk, 4, limit=3) == (b"456", 7)
    assert read_log(job.pk, 7) == (b"789", 10)
    assert read_log(job.pk, 10) == (b"", 10)


@pytest.mark.parametrize("offset", [2**44, 2**63 - 1])
def test_an_offset_far_past_the_end_reads_nothing_sealed_or_live(job, offset):
    logs.append(job.pk, 0, b"live\n")
    assert read_log(job.pk, offset) == (b"", offset)

    seal(job.pk)

    assert read_log(job.pk, offset) == (b"", offset)


def test_the_tail_of_a_sealed_log_is_its_end(job):
    sealed(job, b"first\nsecond\n")

    assert tail(job, size=8) == "second\n"


def test_sealing_again_with_nothing_new_keeps_the_stored_log(job):
    sealed(job, b"one")

    seal(job.pk)

    assert read_log(job.pk) == (b"one", 3)


def test_unsealing_puts_the_log_back_so_the_next_attempt_writes_after_it(job, django_capture_on_commit_callbacks):
    sealed(job, b"attempt 1\n")

    with django_capture_on_commit_callbacks(execute=True):
        logs.unseal(job.pk)
    logs.append(job.pk, logs.end(job.pk), b"attempt 2\n")

    assert not logs.is_sealed(job.pk)
    assert read_log(job.pk) == (b"attempt 1\nattempt 2\n", 20)


# --- stdout and stderr told apart ---------------------------------------------------------------


def test_the_stderr_spans_of_an_append_are_kept_beside_the_one_log(job):
    logs.append(job.pk, 0, b"out\nerr\n", stderr=[(4, 8)])
    logs.append(job.pk, 8, b"more err\nout2\n", stderr=[(8, 17)])

    assert read_log(job.pk)[0] == b"out\nerr\nmore err\nout2\n", "the log stays one stream"
    assert stderr_spans(job, 0, 100) == [(4, 17)], "spans that touch are one"
    assert stderr_spans(job, 17, 100) == []


def test_an_append_repeated_adds_its_spans_once(job):
    logs.append(job.pk, 0, b"err\n", stderr=[(0, 4)])
    logs.append(job.pk, 0, b"err\n", stderr=[(0, 4)])

    assert list(LogSpan.objects.filter(job=job).values_list("start", "end")) == [(0, 4)]


def test_sealing_keeps_the_stderr_spans(job):
    logs.append(job.pk, 0, b"out\nerr\n", stderr=[(4, 8)])

    seal(job.pk, notes=["released"])

    assert logs.tail_pieces(job.pk)[0] == [("out\n", ""), ("err\n", "err"), ("[e31] released\n", "sys")]


def test_pieces_mark_stderr_stdout_and_the_systems_lines_by_their_spans():
    data = b"out\nerr\n[e31] note\nout2\n"

    assert logs.pieces(data, 100, [(104, 108, "err"), (108, 119, "sys")]) == [
        ("out\n", ""),
        ("err\n", "err"),
        ("[e31] note\n", "sys"),
        ("out2\n", ""),
    ]


def test_pieces_split_a_line_the_two_streams_wrote_parts_of():
    # stdout wrote "progress: " without a newline, then stderr wrote "warning\n"
    assert logs.pieces(b"progress: warning\n", 0, [(10, 18, "err")]) == [("progress: ", ""), ("warning\n", "err")]


# --- the platform's lines, known from the store, never from a prefix ----------------------------------


FAKE = b"[e31] fake\nprogress\r[e31] fake\n"


def test_a_jobs_line_that_looks_like_the_platforms_is_its_own_output(job):
    logs.append(job.pk, 0, FAKE)
    logs.append(job.pk, len(FAKE), b"[e31] fake on stderr\n", stderr=[(len(FAKE), len(FAKE) + 21)])
    append_line(job.pk, "real")

    assert logs.tail_pieces(job.pk)[0] == [
        (FAKE.decode(), ""),
        ("[e31] fake on stderr\n", "err"),
        ("[e31] real\n", "sys"),
    ]


def test_the_platforms_lines_stay_marked_once_sealed_and_the_log_stays_one_stream(job):
    logs.append(job.pk, 0, FAKE)
    append_line(job.pk, "attempt 1: node lost; retrying")

    seal(job.pk, notes=["released"])

    whole = FAKE + b"[e31] attempt 1: node lost; retrying\n[e31] released\n"
    assert read_log(job.pk) == (whole, len(whole))
    assert logs.tail_pieces(job.pk)[0] == [
        (FAKE.decode(), ""),
        ("[e31] attempt 1: node lost; retrying\n[e31] released\n", "sys"),
    ]


def test_a_seal_repeated_marks_its_notes_once(job):
    logs.append(job.pk, 0, b"out\n")
    seal(job.pk, notes=["released"])
    LogChunk.objects.create(job=job, offset=0, data=b"out\n")  # as if the first seal died before dropping them

    seal(job.pk, notes=["released"])

    assert list(LogSpan.objects.filter(job=job).values_list("start", "end", "stream")) == [(4, 19, "sys")]


def test_pieces_of_a_read_from_the_middle_use_the_spans_at_their_offsets(job):
    logs.append(job.pk, 0, b"out\nerr\nout2\n", stderr=[(4, 8)])

    data, _ = read_log(job.pk, 4)

    assert logs.read_pieces(job.pk, data, 4) == [("err\n", "err"), ("out2\n", "")]

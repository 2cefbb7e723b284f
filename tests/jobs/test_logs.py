"""Job logs: pumped from the container to a file, from the file to the database, read back by offset."""

import pytest

from jobs import logs
from jobs.logs import TRUNCATED, append_line, read_log, tail
from jobs.models import LogChunk
from worker.logpump import LogPump


@pytest.fixture
def job(member, team, image):
    from tests.factories import submit_job

    return submit_job(member, team, image=image)


def chunks(job) -> list[tuple[int, bytes]]:
    return [(c.offset, bytes(c.data)) for c in LogChunk.objects.filter(job=job).order_by("offset")]


def pumped(job, stream, path) -> LogPump:
    pump = LogPump(iter(stream), path, job.pk)
    pump.finish()
    return pump


def test_the_pump_copies_the_stream_and_flush_moves_the_new_bytes_to_the_database(job, tmp_path):
    pump = pumped(job, [b"loaded 200 rows\n", b"epoch 1\n"], tmp_path / "log.txt")

    assert (tmp_path / "log.txt").read_bytes() == b"loaded 200 rows\nepoch 1\n"
    assert chunks(job) == [(0, b"loaded 200 rows\nepoch 1\n")]
    pump.flush()
    assert len(chunks(job)) == 1, "a flush with nothing new writes nothing"


def test_each_flush_continues_where_the_last_one_ended(job, tmp_path):
    path = tmp_path / "log.txt"
    pump = pumped(job, [b"first\n"], path)
    with open(path, "ab") as more:
        more.write(b"second\n")

    pump.flush()

    assert chunks(job) == [(0, b"first\n"), (6, b"second\n")]


def test_the_pump_stops_writing_at_the_log_cap_and_says_so(job, tmp_path, settings):
    settings.E31_LOG_MAX_BYTES = 10
    stream = iter([b"0123456", b"789abc", b"never written"])

    pumped(job, stream, tmp_path / "log.txt")

    assert (tmp_path / "log.txt").read_bytes() == b"0123456789" + TRUNCATED
    assert next(stream, None) is None, "the stream is drained so the engine is never blocked"


def test_a_broken_stream_ends_the_log_with_why(job, tmp_path):
    def stream():
        yield b"working\n"
        raise ConnectionError("engine went away")

    pumped(job, stream(), tmp_path / "log.txt")

    assert read_log(job.pk)[0] == b"working\n\n[e31: log stream ended: engine went away]\n"


def test_append_line_adds_a_line_of_the_systems_own_after_the_log(job, tmp_path):
    pumped(job, [b"output\n"], tmp_path / "log.txt")

    append_line(job.pk, "refused outputs: passwd (symlink)")

    expected = b"output\n[e31] refused outputs: passwd (symlink)\n"
    assert read_log(job.pk) == (expected, len(expected))


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


def test_tail_is_the_end_of_the_log_as_text(job):
    for n in range(3):
        append_line(job.pk, f"line {n}")

    assert tail(job.pk, size=13) == "[e31] line 2\n"
    assert tail(job.pk).count("\n") == 3


def test_tail_replaces_bytes_that_are_not_utf8(job):
    LogChunk.objects.create(job=job, offset=0, data=b"caf\xc3\xa9 \xff\n")

    assert logs.tail(job.pk) == "café \ufffd\n"

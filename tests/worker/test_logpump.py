"""The log pump: a container's stream to the run's scratch file, new bytes from there to the log store."""

import pytest
from django.db import OperationalError

from jobs.models import LogChunk, LogSpan
from jobs.storage import logs
from jobs.storage.logs import TRUNCATED, read_log
from worker.logpump import LogPump
from worker.sandbox.base import STDERR, STDOUT


@pytest.fixture
def job(member, team):
    from tests.factories import submit_job

    return submit_job(member, team)


def stderr_spans(job, start: int, end: int) -> list[tuple[int, int]]:
    return [(s, e) for s, e, stream in logs.marked_spans(job.pk, start, end) if stream == LogSpan.Stream.STDERR]


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
    assert logs.tail_pieces(job.pk)[0] == [("working\n", ""), ("\n[e31: log stream ended: engine went away]\n", "sys")]


def test_the_cut_at_the_log_cap_is_marked_as_the_platforms_and_a_jobs_fake_is_not(job, tmp_path, settings):
    settings.E31_LOG_MAX_BYTES = 16

    pumped(job, [(STDOUT, b"[e31] fake\n"), (STDERR, b"\r[e31] x")], tmp_path / "log.txt")

    assert logs.tail_pieces(job.pk)[0] == [
        ("[e31] fake\n", ""),
        ("\r[e31", "err"),
        (TRUNCATED.decode(), "sys"),
    ]


def test_a_resumed_pump_skips_what_the_file_has_and_continues_the_log_store(job, tmp_path):
    # The first watcher pumped "first\nsec" and sent "first\n" before it died; the engine's stream of
    # the same container starts again from its first byte.
    path = tmp_path / "log.txt"
    path.write_bytes(b"first\nsec")
    logs.append(job.pk, 0, b"first\n")

    pump = LogPump(iter([b"fir", b"st\nsecond\n", b"third\n"]), path, job.pk, resume=True)
    pump.finish()

    assert path.read_bytes() == b"first\nsecond\nthird\n"
    assert chunks(job) == [(0, b"first\n"), (6, b"second\nthird\n")]
    assert read_log(job.pk)[0] == b"first\nsecond\nthird\n"


def test_a_flush_that_the_database_refused_is_sent_again_by_the_next_one(job, tmp_path, monkeypatch):
    path = tmp_path / "log.txt"
    pump = pumped(job, [b"first\n"], path)
    with open(path, "ab") as more:
        more.write(b"second\n")
    real_append = logs.append

    def dropped(*args):
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(logs, "append", dropped)
    with pytest.raises(OperationalError):
        pump.flush()
    monkeypatch.setattr(logs, "append", real_append)
    pump.flush()

    assert read_log(job.pk)[0] == b"first\nsecond\n"


def test_a_resumed_pump_of_a_second_attempt_continues_after_the_first_attempts_log(job, tmp_path):
    logs.append(job.pk, 0, b"attempt 1\n")  # the job's log before this run
    path = tmp_path / "log.txt"
    first = LogPump(iter([b"attempt 2 says hi\n"]), path, job.pk)  # this run's first watcher…
    first.finish()

    pump = LogPump(iter([b"attempt 2 says hi\n", b"and more\n"]), path, job.pk, resume=True)  # …taken over
    pump.finish()

    assert read_log(job.pk)[0] == b"attempt 1\nattempt 2 says hi\nand more\n"


# --- stdout and stderr ----------------------------------------------------------------------------


def test_the_pump_keeps_one_log_and_sends_the_ranges_that_came_from_stderr(job, tmp_path):
    pumped(job, [(STDOUT, b"out\n"), (STDERR, b"err\n"), (STDOUT, b"out2\n")], tmp_path / "log.txt")

    assert read_log(job.pk)[0] == b"out\nerr\nout2\n"
    assert stderr_spans(job, 0, 100) == [(4, 8)]


def test_a_stderr_range_over_two_flushes_is_sent_in_parts_with_its_bytes(job, tmp_path):
    path = tmp_path / "log.txt"
    pump = pumped(job, [(STDOUT, b"out\n"), (STDERR, b"err")], path)
    with open(path, "ab") as more, open(path.with_name("log.txt.err"), "a") as ranges:
        ranges.write("7 11\n")  # as the pump writes it: the range before its bytes
        ranges.write("11 15\n")  # a range whose bytes are not in the file yet
        more.write(b"ors\n")

    pump.flush()

    assert read_log(job.pk)[0] == b"out\nerrors\n"
    assert stderr_spans(job, 0, 100) == [(4, 11)]
    with open(path, "ab") as more:
        more.write(b"late")
    pump.flush()
    assert stderr_spans(job, 0, 100) == [(4, 15)], "the rest is sent with its bytes"


def test_a_resumed_pump_skips_only_data_bytes_and_keeps_the_stderr_ranges(job, tmp_path):
    # The first watcher pumped "out\ner" (the "er" from stderr) and sent "out\n" before it died.
    path = tmp_path / "log.txt"
    path.write_bytes(b"out\ner")
    path.with_name("log.txt.err").write_text("4 6\n")
    logs.append(job.pk, 0, b"out\n")
    frames = [(STDOUT, b"out\n"), (STDERR, b"err\n"), (STDOUT, b"out2\n")]

    pump = LogPump(iter(frames), path, job.pk, resume=True)
    pump.finish()

    assert read_log(job.pk)[0] == b"out\nerr\nout2\n"
    assert stderr_spans(job, 0, 100) == [(4, 8)]


def test_the_stderr_ranges_of_a_second_attempt_are_offsets_in_the_jobs_log(job, tmp_path):
    logs.append(job.pk, 0, b"attempt 1\n")

    pumped(job, [(STDERR, b"oops\n")], tmp_path / "log.txt")

    assert stderr_spans(job, 0, 100) == [(10, 15)]

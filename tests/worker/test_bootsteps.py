"""The node's heartbeat thread: it beats on its own clock, whatever a beat or the event loop does."""

from tests.conftest import wait_until
from worker.bootsteps import Heartbeat


def test_a_beat_that_fails_does_not_stop_the_heartbeat():
    beats: list[int] = []

    def beat() -> None:
        beats.append(1)
        if len(beats) == 1:
            raise ConnectionError("the database is away")

    heartbeat = Heartbeat(0.01, beat)
    heartbeat.start()
    try:
        wait_until(lambda: len(beats) >= 3, 5, 0.01, message="two beats after the one that failed")
    finally:
        heartbeat.stop()
    assert not heartbeat.is_alive()

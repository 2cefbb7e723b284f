import threading

import pytest

from tests.webhooks.http_receiver import ALLOWED, Receiver


@pytest.fixture
def receivers():
    """Start receivers on loopback with `receivers(answers=[500, 200], delay_s=…)`; all stopped after the test."""
    started: list[Receiver] = []

    def start(**behaviour) -> Receiver:
        receiver = Receiver(**behaviour).start()
        started.append(receiver)
        return receiver

    yield start
    # At once: each takes a poll of its server's loop to stop.
    stopping = [threading.Thread(target=receiver.stop) for receiver in started]
    for thread in stopping:
        thread.start()
    for thread in stopping:
        thread.join(10)


@pytest.fixture
def webhooks_on(settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [ALLOWED]
    return settings

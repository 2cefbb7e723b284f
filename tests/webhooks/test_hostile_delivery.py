"""A hostile receiver: what it can make the sender do. The 5 s are a deadline for the whole request, not per
read, so a receiver that trickles its answer a byte at a time cannot hold the pass (and a worker's slot)."""

import logging
import socket
import threading
import time

import pytest
from django.utils import timezone

from tests.factories import webhook_of
from tests.webhooks.http_receiver import bind_in_range
from webhooks.delivery import TIMEOUT_S, deliver_due, enqueue
from webhooks.models import Delivery

pytestmark = pytest.mark.usefixtures("webhooks_on")


class Trickler:
    """A receiver on loopback that reads the request, then sends its answer one byte every `every_s`,
    after answering the first `redirects` requests with a 307 to itself."""

    def __init__(self, *, every_s: float = 0.5, redirects: int = 0) -> None:
        self.every_s = every_s
        self.redirects = redirects
        self.stopping = threading.Event()
        self.server = socket.socket()
        self.port = bind_in_range(lambda port: self.server.bind(("127.0.0.1", port)))
        self.server.listen()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def serve(self) -> None:
        with self.server:
            self.server.settimeout(0.2)
            while not self.stopping.is_set():
                try:
                    conn, _ = self.server.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        """Each request read: a 307 while redirects are left, else the trickle. The connection is kept open
        after a 307, so a sender that keeps it alive sends its next request on it."""
        with conn:
            try:
                while conn.recv(65536):
                    if self.redirects > 0:
                        self.redirects -= 1
                        conn.sendall(
                            f"HTTP/1.1 307 Moved\r\nLocation: {self.url}\r\nContent-Length: 0\r\n\r\n".encode()
                        )
                        continue
                    # About 30 s of trickle: long enough to tell, short enough that a sender without a
                    # deadline fails this test rather than hangs it.
                    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 40:
                        if self.stopping.wait(self.every_s):
                            return
                        conn.sendall(bytes([byte]))
                    return
            except OSError:  # the sender cut the connection
                pass

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)


@pytest.fixture
def trickler():
    started: list[Trickler] = []

    def start(**kwargs) -> Trickler:
        started.append(Trickler(**kwargs))
        return started[-1]

    yield start
    for one in started:
        one.stop()


@pytest.mark.parametrize("redirects", [0, 1], ids=["first request", "after a redirect"])
def test_a_receiver_trickling_its_answer_is_cut_off_after_5_s(trickler, member, team, redirects):
    receiver = trickler(redirects=redirects)
    webhook_of(team, member, receiver.url)
    enqueue(team.pk, "job.released", {"id": "0b5e"}, now=timezone.now())

    began = time.monotonic()
    assert deliver_due(seconds=1) == 1
    took = time.monotonic() - began

    assert took < TIMEOUT_S + 5  # slack for a busy machine; without the deadline it is 30 s
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.status_class, delivery.response_code, delivery.attempts) == (
        "pending", "no answer", None, 1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("code", "location", "words"),
    [
        (301, "http://127.0.0.2:{port}/hook", "not one webhooks may reach"),
        (308, "//127.0.0.2:{port}/hook", "not one webhooks may reach"),  # scheme-relative
        (307, "http://2130706434:{port}/hook", "(127.0.0.2) is not one"),  # 127.0.0.2 as one decimal number
        (303, "http://0x7f.2:{port}/hook", "(127.0.0.2) is not one"),
        (302, "http://[::ffff:127.0.0.2]:{port}/hook", "not one webhooks may reach"),
        (307, "http://127.0.0.1@127.0.0.2:{port}/hook", "user or password"),
        (308, "file:///etc/passwd", "Only http and https"),
        (301, "gopher://127.0.0.1:{port}/_", "Only http and https"),
    ],
)
def test_a_redirect_is_checked_as_the_first_url_was(receivers, member, team, code, location, words, caplog):
    elsewhere = receivers(host="127.0.0.2")
    first = receivers(answers=[code], location=location.format(port=elsewhere.port))
    webhook, first.secret = webhook_of(team, member, first.url)
    enqueue(team.pk, "job.released", {"id": "0b5e"}, now=timezone.now())

    with caplog.at_level(logging.INFO, logger="webhooks.delivery"):
        deliver_due()

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.status_class, delivery.response_code) == ("pending", "not allowed", code)
    assert words in caplog.text  # why, for the operator
    assert len(first.received) == 1 and elsewhere.received == []

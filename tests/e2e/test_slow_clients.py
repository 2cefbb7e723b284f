"""Slow clients cannot hold the web server: the real gunicorn, started as `make run` starts it (its
config file, its number of worker processes) on a loopback port, against the test database.

Three downloads of a job's outputs.zip read at 50 kB/s while the login page answers in under a
second; a request whose headers or body stop arriving is answered or closed within the client
timeout (E31_WEB_CLIENT_TIMEOUT_S, short here) instead of holding a thread for good.
"""

import re
import secrets
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.test import Client
from django.utils import timezone

from jobs.models import Outcome
from teams.people import token_for
from tests.conftest import worker_env
from tests.factories import ended_job, store_output
from tests.workers import start_gunicorn, stop_process, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent
CLIENT_TIMEOUT_S = 2
SLOW_RATE = 50_000  # bytes a second, read 5 kB at a time
OUTPUT_BYTES = 4 * 1024 * 1024  # each of three outputs: random, so the zip is as large (12 MiB)

pytestmark = pytest.mark.gunicorn


class WebServer:
    """`gunicorn e31site.wsgi` with the project's config on a free loopback port, logging to `log`."""

    def __init__(self, tmp_path: Path, *, client_timeout_s: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = tmp_path / "gunicorn.log"
        env = worker_env(
            DJANGO_SECRET_KEY=settings.SECRET_KEY,  # the session's hash is checked with it
            E31_STORE_DIR=settings.STORAGES["default"]["OPTIONS"]["location"],
            E31_WEB_CLIENT_TIMEOUT_S=str(client_timeout_s),
        )
        with open(self.log, "wb") as log:
            self.process = start_gunicorn(self.port, env=env, log=log)
        wait_until(lambda: self.answers() or self.process.poll() is not None, 60, message="gunicorn to answer")
        assert self.process.poll() is None, f"gunicorn ended: {self.log.read_text()[-3000:]}"

    def answers(self) -> bool:
        try:
            return self.get("/login/", timeout=2).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def connect(self, *, timeout: float, receive_buffer: int = 0) -> socket.socket:
        sock = socket.socket()
        if receive_buffer:  # before connecting: it sets the window the client offers
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(timeout)
        sock.connect(("127.0.0.1", self.port))
        return sock

    def get(self, path: str, *, timeout: float, cookie: str = "") -> bytes:
        """The whole answer to a GET (status line, headers, body)."""
        with self.connect(timeout=timeout) as sock:
            sock.sendall(request("GET", path, cookie=cookie))
            return read_all(sock)

    def stop(self) -> None:
        stop_process(self.process)


def request(method: str, path: str, *, cookie: str = "", headers: str = "", body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if cookie:
        head += f"Cookie: {cookie}\r\n"
    return f"{head}{headers}\r\n".encode() + body


def read_all(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@contextmanager
def running(tmp_path: Path, *, client_timeout_s: int) -> Iterator[WebServer]:
    server = WebServer(tmp_path, client_timeout_s=client_timeout_s)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def web(transactional_db, tmp_path):
    with running(tmp_path, client_timeout_s=CLIENT_TIMEOUT_S) as server:
        yield server


@pytest.fixture
def patient_web(transactional_db, tmp_path):
    """The server with its default client timeout: on loopback a connection's send buffer grows to
    megabytes, so a writer blocked on a slow reader waits seconds between wake-ups, and the short
    timeout would cut the downloads this test needs served."""
    with running(tmp_path, client_timeout_s=settings.E31_WEB_CLIENT_TIMEOUT_S) as server:
        yield server


@pytest.fixture
def session_cookie(member) -> str:
    """The member signed in: the session is in the database, which the server reads."""
    client = Client()
    client.force_login(member)
    session = client.session
    assert session[SESSION_KEY] == str(member.pk)
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


@pytest.fixture
def big_outputs(member, team, local_node):
    """A released job with three 4 MiB outputs of random bytes (a zip cannot make them smaller)."""
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    for name in ("a.bin", "b.bin", "c.bin"):
        store_output(job, name, secrets.token_bytes(OUTPUT_BYTES))
    return job


class SlowDownload(threading.Thread):
    """A client reading a GET's answer at SLOW_RATE through a small receive window, until halted."""

    def __init__(self, web: WebServer, path: str, cookie: str) -> None:
        super().__init__(daemon=True)
        self.sock = web.connect(timeout=10, receive_buffer=16 * 1024)
        self.sock.sendall(request("GET", path, cookie=cookie))
        self.head = b""  # the start of the answer: status line and headers
        self.bytes_read = 0
        self.finished = False  # the server closed: the whole answer came
        self.halt = threading.Event()

    def run(self) -> None:
        with self.sock:
            while not self.halt.wait(0.1):
                chunk = self.sock.recv(SLOW_RATE // 10)
                if not chunk:
                    self.finished = True
                    return
                self.head += chunk[: max(0, 500 - len(self.head))]
                self.bytes_read += len(chunk)


def test_three_slow_downloads_leave_the_login_page_answering_in_under_a_second(
    patient_web, session_cookie, big_outputs
):
    web = patient_web
    for _ in range(6):  # each process compiles the page's templates once, at its first rendering
        web.get("/login/", timeout=10)
    downloads = [SlowDownload(web, f"/jobs/{big_outputs.pk}/outputs.zip", session_cookie) for _ in range(3)]
    for download in downloads:
        download.start()
    try:
        wait_until(lambda: all(d.bytes_read > 50_000 for d in downloads), 30, message="the three downloads to flow")
        read_before = [d.bytes_read for d in downloads]

        timings = []
        for _ in range(10):  # over five seconds, while the three read
            started = time.monotonic()
            answer = web.get("/login/", timeout=10)
            timings.append(time.monotonic() - started)
            assert answer.startswith(b"HTTP/1.1 200") and b'name="password"' in answer
            time.sleep(max(0.0, 0.5 - timings[-1]))

        read_during = [d.bytes_read - before for d, before in zip(downloads, read_before, strict=True)]
        still_reading = [not d.finished and d.is_alive() for d in downloads]
    finally:
        for download in downloads:
            download.halt.set()
        for download in downloads:
            download.join(10)

    assert all(d.head.startswith(b"HTTP/1.1 200") and b"application/zip" in d.head for d in downloads)
    assert still_reading == [True, True, True] and min(read_during) > 100_000  # served all along, slowly
    assert max(read_during) < 8 * SLOW_RATE
    assert max(timings) < 1.0, f"/login/ took {timings}"


def test_a_request_whose_headers_stop_is_closed_within_the_client_timeout(web):
    with web.connect(timeout=CLIENT_TIMEOUT_S + 10) as sock:
        sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the blank line never comes
        started = time.monotonic()
        answer = read_all(sock)
        waited = time.monotonic() - started

    assert answer == b""  # closed: there is no request to answer
    assert CLIENT_TIMEOUT_S - 0.5 < waited < CLIENT_TIMEOUT_S + 2


class TrickledHeaders(threading.Thread):
    """A client sending its request's headers one line every half second (slowloris), never the end."""

    def __init__(self, web: WebServer) -> None:
        super().__init__(daemon=True)
        self.sock = web.connect(timeout=10)
        self.sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        self.cut = False  # the server closed the connection before the client was done

    def run(self) -> None:
        with self.sock:
            for line in range(90):  # the server's 100 header lines at most: 45 s, far past the timeout
                readable, _, _ = select.select([self.sock], [], [], 0.5)
                try:
                    if readable and not self.sock.recv(1024):
                        break
                    self.sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
                except OSError:
                    break
            else:
                return
            self.cut = True


def test_headers_trickled_by_more_clients_than_threads_are_cut_at_the_client_timeout(web):
    clients = 30  # more than make run's 3 processes × 8 threads
    trickles = [TrickledHeaders(web) for _ in range(clients)]
    for trickle in trickles:
        trickle.start()
    # A connection's deadline starts when a thread takes it, and the processes share the connections
    # unevenly (one may accept most of them): at worst they are cut in waves of one process's threads,
    # each a timeout (and a second of slack) after the one before. Held for good, a trickle would go on
    # for its 45 s, still sending when this wait ends.
    waves = -(-clients // settings.E31_WEB_THREADS)
    deadline = time.monotonic() + waves * (CLIENT_TIMEOUT_S + 1) + 5
    for trickle in trickles:
        trickle.join(max(0.0, deadline - time.monotonic()))

    assert [t.cut for t in trickles] == [True] * clients
    assert web.get("/login/", timeout=5).startswith(b"HTTP/1.1 200")


def answer_to_a_stalled_body(web: WebServer, path: str, *, headers: str, cookie: str = "") -> tuple[bytes, float]:
    """What the server says to a POST declaring 1,000 bytes of body that sends 2, and how soon."""
    with web.connect(timeout=CLIENT_TIMEOUT_S + 10) as sock:
        sock.sendall(request("POST", path, cookie=cookie, headers=f"{headers}Content-Length: 1000\r\n", body=b"ab"))
        started = time.monotonic()
        answer = read_all(sock)
        return answer, time.monotonic() - started


def test_an_api_request_whose_body_stops_is_answered_400_within_the_client_timeout(web, member):
    answer, waited = answer_to_a_stalled_body(
        web,
        "/api/v1/jobs/",
        headers=f"Authorization: Token {token_for(member)}\r\nContent-Type: multipart/form-data; boundary=x\r\n",
    )

    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
    assert b'{"detail":"The request\'s body did not arrive: the client stopped sending it."}' in answer
    assert CLIENT_TIMEOUT_S - 0.5 < waited < CLIENT_TIMEOUT_S + 2


def test_a_form_whose_body_stops_is_answered_400_not_a_csrf_failure(web):
    login = web.get("/login/", timeout=10)
    csrf = re.search(rb"csrftoken=([^;]+)", login)
    assert csrf

    answer, waited = answer_to_a_stalled_body(
        web,
        "/login/",
        cookie=f"csrftoken={csrf[1].decode()}",
        headers="Content-Type: application/x-www-form-urlencoded\r\n",
    )

    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
    assert CLIENT_TIMEOUT_S - 0.5 < waited < CLIENT_TIMEOUT_S + 2

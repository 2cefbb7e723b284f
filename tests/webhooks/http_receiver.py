"""A real HTTP receiver of webhooks on loopback: a ThreadingHTTPServer in a thread that records every
request, checks its signature as a receiver would, and answers as it is told (a status list, a delay,
a redirect)."""

import errno
import hashlib
import hmac
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The ports the suite's receivers listen on, below the kernel's ephemeral range so no outgoing connection
# holds one; the allow list of the tests (and of their worker processes) opens these ports only.
PORTS = range(19000, 20000)
ALLOWED = f"127.0.0.1:{PORTS.start}-{PORTS.stop - 1}"


def bind_in_range(bind: Callable[[int], None]) -> int:
    """Bind to a free port of PORTS (other test processes hold some), tried at random; returns it."""
    for port in random.sample(PORTS, len(PORTS)):
        try:
            bind(port)
            return port
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    raise OSError(errno.EADDRINUSE, f"no free port in {PORTS}")


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    path: str
    signed: bool  # the signature matched the receiver's secret


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """What a receiver of ours does with the secret: recompute the signature and compare in constant time."""
    signed = headers.get("X-E31-Timestamp", "").encode() + b"." + body
    expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers.get("X-E31-Signature", ""))


@dataclass
class Receiver:
    answers: list[int] = field(default_factory=lambda: [200])  # one per request, the last one repeated
    delay_s: float = 0.0
    location: str = ""  # sent with a 3xx answer
    secret: str = ""
    host: str = "127.0.0.1"  # any loopback address: 127.0.0.2 is one the allow list of the tests does not name
    silent_paths: tuple[str, ...] = ()  # a request to one of these is read and never answered
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.open_now = self.most_open = 0  # requests read and not yet answered (or given up by the sender)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = dict(self.headers.items())
                receiver.received.append(Received(headers, body, self.path, verify(receiver.secret, headers, body)))
                with receiver.lock:
                    receiver.open_now += 1
                    receiver.most_open = max(receiver.most_open, receiver.open_now)
                if self.path.startswith(receiver.silent_paths or ("\0",)):
                    # Silent until the sender gives up (its deadline closes the connection: seen at once, as a
                    # blocked read returns) or the test ends.
                    self.connection.settimeout(0.5)
                    while not receiver.stopping.is_set():
                        try:
                            if self.connection.recv(1) == b"":
                                break
                        except TimeoutError:
                            continue
                        except OSError:
                            break
                    with receiver.lock:
                        receiver.open_now -= 1
                    return
                if receiver.delay_s:
                    receiver.stopping.wait(receiver.delay_s)
                with receiver.lock:  # answered from here: the sender may send its next request once it reads this
                    receiver.open_now -= 1
                n = len(receiver.received) - 1
                code = receiver.answers[min(n, len(receiver.answers) - 1)]
                try:
                    self.send_response(code)
                    if receiver.location and 300 <= code < 400:
                        self.send_header("Location", receiver.location)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sender gave up waiting
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((self.host, 0), Handler, bind_and_activate=False)
        self.server.daemon_threads = True
        server = self.server

        def bind(port: int) -> None:
            server.server_address = (receiver.host, port)
            server.server_bind()

        bind_in_range(bind)
        self.server.server_activate()
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return self.url_at("/hook")

    def url_at(self, path: str) -> str:
        return f"http://{self.host}:{self.server.server_address[1]}{path}"

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> "Receiver":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def on(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def wait_for(self, n: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.received) >= n, f"{len(self.received)} of {n} deliveries received"
        return self.received

"""What the tests of `e31` share: the command line run in-process against a stand-in server that records what it
was sent (`e31`, `Server`), and run as a process against the real server (`real_server`, `e31_process`)."""

import os
import subprocess
import sys
import time
from collections.abc import Callable
from urllib.parse import parse_qs

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from e31cli import main, session
from e31cli.client import Api
from e31cli.config import Config
from teams.people import token_for
from tests.factories import RuntimeImageFactory

E31 = [sys.executable, "-m", "e31cli"]  # what .venv/bin/e31 runs, from the same interpreter


class Server:
    """Answers by path: a JSON body, a (status, body) pair, or a list of them given one per request (the last
    one again after: a body that is a list goes in a pair); a log's path answers a list of byte chunks, one
    per offset. Keeps every request it was sent."""

    def __init__(self, routes: dict) -> None:
        self.routes = routes
        self.requests: list[httpx.Request] = []
        self.served: dict[str, int] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        answer = self.routes.get(path, (404, {"detail": "No Job matches the given query."}))
        if path.endswith("/logs/") and isinstance(answer, list):
            return self.log(answer, int(request.url.params["offset"]))
        if isinstance(answer, list):
            n = self.served[path] = self.served.get(path, -1) + 1
            answer = answer[min(n, len(answer) - 1)]
        status, body = answer if isinstance(answer, tuple) else (200, answer)
        return httpx.Response(status, json=body)

    @staticmethod
    def log(chunks: list[bytes], offset: int) -> httpx.Response:
        """The chunk that starts at `offset` (none past the end), of a released job."""
        starts = [sum(len(c) for c in chunks[:n]) for n in range(len(chunks) + 1)]
        chunk = chunks[starts.index(offset)] if offset in starts[:-1] else b""
        headers = {"X-Next-Offset": str(offset + len(chunk)), "X-Job-Stage": "release"}
        return httpx.Response(200, content=chunk, headers=headers)

    def form(self) -> dict[str, list[str]]:
        """The fields of the one POST it was sent (a form body: no --data files)."""
        (posted,) = [r for r in self.requests if r.method == "POST"]
        return parse_qs(posted.content.decode())

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


@pytest.fixture
def e31(monkeypatch):
    """`e31(server, *args)`: the command line in-process against `server` (a Server, its routes, or any function
    of a request to its response), its polls not waited for."""
    # The consoles are made when e31cli is first imported, and keep the COLUMNS of that moment (an 80 column
    # screen would cut the names the tests read whole): give them a wide screen for the test.
    for console in (session.out, session.err):
        monkeypatch.setattr(console, "_width", 400)
    monkeypatch.setattr(time, "sleep", lambda _s: None)

    def run(server: Callable[[httpx.Request], httpx.Response] | dict, *args: str) -> Result:
        transport = httpx.MockTransport(Server(server) if isinstance(server, dict) else server)

        def fake_api(*, need_token: bool = True) -> Api:
            client = Api(Config(url="http://e31.test", token="k"))
            client.http = httpx.Client(base_url="http://e31.test", headers=client.http.headers, transport=transport)
            return client

        monkeypatch.setattr(session, "api", fake_api)
        return CliRunner().invoke(main.app, list(args), env={"COLUMNS": "400"})

    return run


@pytest.fixture
def real_server(live_server, member):
    """The site's URL (an image registered) and a token of a team member."""
    RuntimeImageFactory()
    return live_server.url, token_for(member)


def e31_process(
    *args: str, url: str, token: str = "", home: str = "/nonexistent", text: bool = True
) -> subprocess.CompletedProcess:
    """`e31` as a process, as a user runs it; `home`: where it keeps its configuration."""
    env = {**os.environ, "E31_URL": url, "E31_TOKEN": token, "XDG_CONFIG_HOME": home, "COLUMNS": "250"}
    return subprocess.run([*E31, *args], env=env, capture_output=True, text=text, timeout=60, check=False)

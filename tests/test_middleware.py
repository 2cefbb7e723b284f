import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parent.parent


def test_htmx_poll_after_the_session_expired_redirects_the_whole_page(client, db):
    response = client.get("/jobs/00000000-0000-0000-0000-000000000000/live/", HTTP_HX_REQUEST="true")

    assert response.status_code == 204
    assert response["HX-Redirect"].startswith("/login/?next=")


def test_a_plain_request_is_still_redirected_to_login(client, db):
    response = client.get("/jobs/new/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_api_without_credentials_answers_401_with_the_token_challenge(client, db):
    response = client.get("/api/v1/jobs/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


# --- a declared upload over the limit, through a real gunicorn ------------------------------------------------


@pytest.fixture
def gunicorn(tmp_path):
    """The production web server (one sync worker, its 30 s timeout) on a free port, local defaults."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env |= {"E31_VAR_DIR": str(tmp_path), "E31_UPLOAD_JOB_MAX_MB": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "e31site.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: _answers(port), 30, message="gunicorn to listen")
        yield port
    finally:
        server.terminate()
        server.wait(10)


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("path, status", [("/api/v1/jobs/", "413"), ("/jobs/new/", "302")])  # 302: to log in first
def test_a_declared_upload_over_the_limit_is_answered_at_once_without_its_body(gunicorn, path, status):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=x\r\n"
        f"Content-Length: {20 * 1024**3}\r\n\r\n"
    )
    # Not one byte of the 20 GB announced is sent. Without the check the sync worker waits for the
    # body until its 30 s timeout and the connection ends with no answer (or a 500): any answer
    # before that, whatever the machine's load, is the early refusal.
    with socket.create_connection(("127.0.0.1", gunicorn), timeout=25) as client:
        client.sendall(head.encode())
        answer = client.recv(65536).decode(errors="replace")

    assert answer.startswith(f"HTTP/1.1 {status}"), answer[:200]

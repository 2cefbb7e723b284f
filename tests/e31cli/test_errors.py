"""What `e31` says when it cannot work: a bad token, a server that is down, a job that is not there, a bad
command line. One line on stderr, never a traceback, and the documented exit code."""

import json
import socket
import subprocess
import uuid

import pytest
import redis

from core.when import BAD_DURATION
from e31cli.exits import Exit
from tests.e31cli.conftest import e31_process


def error_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_bad_token_is_an_authentication_error(real_server):
    url, _ = real_server
    result = e31_process("list", url=url, token="not-a-token")

    assert result.returncode == Exit.AUTH
    assert error_line(result) == "e31: not allowed: Invalid token."


def test_no_token_at_all_says_how_to_get_one(tmp_path):
    result = e31_process("list", url="http://127.0.0.1:9", home=str(tmp_path))

    assert result.returncode == Exit.AUTH and "e31 login" in error_line(result)


def test_a_server_that_is_down_is_unreachable():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = e31_process("list", url=f"http://127.0.0.1:{port}", token="x")

    assert result.returncode == Exit.UNREACHABLE
    assert error_line(result).startswith(f"e31: cannot reach the server at http://127.0.0.1:{port}")


@pytest.fixture
def windows_in_redis(settings):
    """The web server's counts in Redis under a prefix of this test's own, as in production (the suite's
    cache is local memory); each thread of the live server opens its own client of it. Yields a function
    listing the keys kept there."""
    prefix = f"e31-test-{uuid.uuid4().hex}"
    location = settings.CELERY_BROKER_URL
    settings.CACHES = {
        "default": {"BACKEND": "core.cache.SharedClientRedisCache", "LOCATION": location, "KEY_PREFIX": prefix}
    }
    client = redis.Redis.from_url(location, decode_responses=True)
    yield lambda: sorted(key.removeprefix(f"{prefix}:1:") for key in client.keys(f"{prefix}:*"))
    keys = client.keys(f"{prefix}:*")
    if keys:
        client.delete(*keys)  # not clear(): that would empty the broker's database
    client.close()


def test_a_client_locked_out_for_unknown_tokens_leaves_a_good_client_on_the_same_host_working(
    real_server, settings, windows_in_redis
):
    settings.E31_API_THROTTLE_RATES = {**settings.E31_API_THROTTLE_RATES, "failed_token": "3/hour"}
    settings.E31_API_FAILED_TOKEN_LOCKOUT_MIN = 2
    url, token = real_server

    stale = [e31_process("list", url=url, token=f"revoked-key-{n}") for n in range(4)]  # 127.0.0.1, as the good one

    assert [result.returncode for result in stale] == [Exit.AUTH, Exit.AUTH, Exit.AUTH, Exit.THROTTLED]
    locked = error_line(stale[3])  # at once: a wait of minutes is not waited out (the helper's timeout)
    assert locked.startswith("e31: throttled: Too many unknown tokens") and "refused for 2 minutes" in locked
    good = e31_process("list", "--json", url=url, token=token)
    assert good.returncode == 0 and good.stdout.strip() == "[]", good.stderr
    assert e31_process("list", url=url, token="revoked-key-9").returncode == Exit.THROTTLED
    assert "window:failed_token:address:127.0.0.1:lockout" in windows_in_redis()


def test_a_job_that_is_not_there_is_not_found(real_server):
    url, token = real_server
    result = e31_process("show", "00000000-0000-0000-0000-000000000000", url=url, token=token)

    assert result.returncode == Exit.NOT_FOUND and error_line(result).startswith("e31: not found")


def test_a_request_the_server_refuses_names_the_field(real_server):
    url, token = real_server
    result = e31_process("submit", "--image", "nope", "--", "true", url=url, token=token)

    assert result.returncode == Exit.REFUSED
    assert error_line(result).startswith("e31: refused (400): image:")


def test_a_time_limit_is_read_by_the_server_with_the_forms_words(real_server):
    url, token = real_server
    result = e31_process("submit", "--image", "busybox", "--time", "soon", "--", "true", url=url, token=token)

    assert result.returncode == Exit.REFUSED
    assert error_line(result).startswith("e31: refused (400):") and f"time_limit_s: {BAD_DURATION}" in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["submit", "--image", "busybox", "--memory", "lots", "--", "true"], "--memory"),
        (["submit", "--image", "busybox", "--env", "NOEQUALS", "--", "true"], "--env"),
        (["list", "--since", "last tuesday"], "--since"),
    ],
)
def test_a_bad_value_on_the_command_line_is_a_usage_error(real_server, args, said):
    url, token = real_server
    result = e31_process(*args, url=url, token=token)

    assert result.returncode == Exit.USAGE and said in error_line(result)


def test_an_unknown_option_is_a_usage_error_from_click():
    result = e31_process("submit", "--colour", "blue", url="http://127.0.0.1:9", token="x")

    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_login_checks_the_token_before_keeping_it(real_server, tmp_path):
    url, token = real_server
    refused = e31_process("login", "--url", url, "--token", "wrong", url="", home=str(tmp_path))
    assert refused.returncode == Exit.AUTH and not (tmp_path / "e31" / "config").exists()

    kept = e31_process("login", "--url", url, "--token", token, url="", home=str(tmp_path))
    assert kept.returncode == 0, kept.stderr
    assert (tmp_path / "e31" / "config").stat().st_mode & 0o777 == 0o600
    assert e31_process("list", "--json", url="", token="", home=str(tmp_path)).stdout.strip() == "[]"


def test_tokens_are_made_listed_and_revoked_from_the_command_line(real_server, tmp_path):
    url, token = real_server
    made = e31_process("tokens", "create", "nightly cron", url=url, token=token)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()

    listed = e31_process("tokens", "list", "--json", url=url, token=key)
    mine = [t for t in json.loads(listed.stdout) if t["name"] == "nightly cron"]
    assert len(mine) == 1 and key.startswith(mine[0]["prefix"])

    assert e31_process("tokens", "revoke", str(mine[0]["id"]), url=url, token=token).returncode == 0
    refused = e31_process("tokens", "list", url=url, token=key)
    assert refused.returncode == Exit.AUTH

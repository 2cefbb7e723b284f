"""`--since` and `--until` are sent as typed and read by the server (core.when), as `--time` is: the command
line keeps no reader of durations. A value the server refuses is still a usage error naming the option."""

import pytest

from e31cli.exits import Exit
from tests.e31cli.conftest import Server, e31_process

PAGE = {"count": 0, "next": None, "previous": None, "results": []}
USAGE = {"group_by": "day", "rows": [], "store": []}


def test_list_sends_since_and_until_as_typed(e31):
    server = Server({"/api/v1/jobs/": PAGE})

    result = e31(server, "list", "--since", "7d", "--until", "2030-01-01")

    assert result.exit_code == 0, result.output
    (request,) = server.requests
    assert (request.url.params["since"], request.url.params["until"]) == ("7d", "2030-01-01")


def test_usage_sends_since_as_typed_to_the_totals_and_the_records(e31):
    server = Server({"/api/v1/accounting/usage/": USAGE, "/api/v1/accounting/records/": PAGE})

    result = e31(server, "usage", "--since", "1h30m")

    assert result.exit_code == 0, result.output
    assert [r.url.params["since"] for r in server.requests] == ["1h30m", "1h30m"]


def test_a_since_the_server_refuses_is_a_usage_error_in_its_words(e31):
    server = Server({"/api/v1/jobs/": (400, {"since": ["Enter a valid date/time."]})})

    result = e31(server, "list", "--since", "last tuesday")

    assert result.exit_code == Exit.USAGE
    assert result.stderr == "e31: --since: Enter a valid date/time.\n"


def test_a_refusal_of_another_field_stays_a_refusal(e31):
    server = Server({"/api/v1/jobs/": (400, {"team": ["Enter a valid slug."]})})

    result = e31(server, "list", "--since", "24h", "--team", "red team")

    assert result.exit_code == Exit.REFUSED


@pytest.mark.parametrize("command", ["list", "usage"])
def test_a_duration_back_from_now_is_read_by_the_real_server(real_server, command):
    url, token = real_server

    result = e31_process(command, "--since", "24h", "--until", "1m", "--json", url=url, token=token)

    assert result.returncode == 0, result.stderr

"""A session cookie that no key of ours could be is no session, whatever bytes it holds."""

import pytest


@pytest.mark.parametrize("cookie", ["\x7f\xd5\xb21\x00\xe1\xe7\x0bb", "abc\x00defghijk", "UPPER-CASE-KEY-1234"])
def test_a_malformed_session_cookie_is_no_session(client, db, cookie):
    client.cookies["sessionid"] = cookie

    assert client.get("/api/v1/jobs/").status_code == 401
    assert client.get("/jobs/").status_code == 302  # to the login page

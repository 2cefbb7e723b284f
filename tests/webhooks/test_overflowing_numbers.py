"""The webhooks API takes no number in a body; the numbers it takes are ids in its paths and the page of its lists.
Past a bigint, an id is 404 as any id of no webhook of the caller's teams, and a page 404 as one past the end."""

import pytest

URL = "/api/v1/webhooks/"


@pytest.fixture
def no_500(api):
    api.raise_request_exception = False
    return api


@pytest.mark.parametrize("webhook_id", [2**63, 10**30])
def test_a_webhook_id_past_a_bigint_is_404(no_500, client, member, webhook_id):
    client.force_login(member)

    assert no_500.get(f"{URL}{webhook_id}/").status_code == 404
    assert no_500.patch(f"{URL}{webhook_id}/", {"active": False}, format="json").status_code == 404
    assert no_500.get(f"{URL}{webhook_id}/deliveries/").status_code == 404
    assert client.get(f"/account/webhooks/{webhook_id}/deliveries/").status_code == 404
    assert client.post(f"/account/webhooks/{webhook_id}/delete/").status_code == 404


@pytest.mark.parametrize("page", [2**63, 10**30])
def test_a_page_past_a_bigint_is_404(no_500, page):
    assert no_500.get(URL, {"page": page}).status_code == 404

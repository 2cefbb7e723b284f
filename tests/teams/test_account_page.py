"""/account/: a person's tokens, made (the key shown once) and revoked with htmx."""

from teams.models import ApiToken
from teams.tokens import issue_token, user_for_key

ACCOUNT = "/account/"
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_page_lists_my_tokens_by_name_and_prefix_only(client, member, teammate):
    token, key = issue_token(member, name="nightly cron")
    issue_token(teammate, name="bob's laptop")
    client.force_login(member)

    page = client.get(ACCOUNT).content.decode()

    assert "nightly cron" in page and token.prefix in page and key not in page
    assert "bob&#x27;s laptop" not in page and "bob's laptop" not in page


def test_making_a_token_shows_its_key_once(client, member):
    client.force_login(member)

    fragment = client.post(ACCOUNT, {"name": "ci"}, **HTMX).content.decode()

    token = ApiToken.objects.get(user=member, name="ci")
    key = fragment.split('<code class="key">')[1].split("</code>")[0]
    assert user_for_key(key) == member and key.startswith(token.prefix)
    assert "<html" not in fragment  # the fragment alone, for htmx
    assert key not in client.get(ACCOUNT).content.decode()


def test_a_token_without_a_name_is_refused_with_the_field_named(client, member):
    client.force_login(member)

    response = client.post(ACCOUNT, {"name": ""}, **HTMX)

    assert response.status_code == 200 and "field-name invalid" in response.content.decode()
    assert not ApiToken.objects.filter(user=member).exists()


def test_a_token_name_with_an_escape_is_refused_on_the_page(client, member):
    client.force_login(member)

    response = client.post(ACCOUNT, {"name": "\x1b]0;title\x07"}, **HTMX)

    assert response.status_code == 200 and "U+001B" in response.content.decode()
    assert not ApiToken.objects.filter(user=member).exists()


def test_revoking_a_token_removes_it(client, member):
    token, key = issue_token(member, name="old")
    client.force_login(member)

    response = client.post(f"/account/tokens/{token.pk}/revoke/", **HTMX)

    assert response.status_code == 200 and "Token revoked" in response.content.decode()
    assert user_for_key(key) is None


def test_revoking_without_htmx_goes_back_to_the_page(client, member):
    token, _ = issue_token(member, name="old")
    client.force_login(member)

    response = client.post(f"/account/tokens/{token.pk}/revoke/")

    assert response.status_code == 302 and response["Location"] == ACCOUNT


def test_someone_elses_token_is_404(client, member, outsider):
    token, key = issue_token(outsider, name="eve's")
    client.force_login(member)

    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert user_for_key(key) == outsider


def test_revoking_needs_a_post(client, member):
    token, _ = issue_token(member, name="old")
    client.force_login(member)

    assert client.get(f"/account/tokens/{token.pk}/revoke/").status_code == 405


def test_the_page_needs_a_login(client, db):
    response = client.get(ACCOUNT)

    assert response.status_code == 302 and "/login/" in response["Location"]

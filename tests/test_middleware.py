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
